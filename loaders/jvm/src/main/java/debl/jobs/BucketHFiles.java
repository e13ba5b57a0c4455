package debl.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.io.ImmutableBytesWritable;
import org.apache.hadoop.hbase.mapreduce.HFileOutputFormat2;
import org.apache.hadoop.io.IOUtils;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.util.CollectionAccumulator;
import scala.Tuple2;

/**
 * gen_HF's conversion on the JVM: one Spark task per bucket reads the bucket's files (dist_ch's
 * output), applies the merge rule, sorts the winners by row key and hands them to HBase's own
 * {@code HFileOutputFormat2}. Called from Python ({@code loaders.gen_hf}) through py4j
 * ({@code loaders/jobs.py}).
 *
 * <p>Why on the JVM: done in Python, the per-line parse, the merge and the pickling of every cell
 * through pyrolite into a {@code KeyValue} made gen_HF convert about 5 MB/s on 2 cores; here no
 * row crosses the Python boundary.
 *
 * <p>The formats mirror the Python definitions, which stay the reference (tests compare the two):
 * a bucket line is {@code id1 TAB link_type TAB id2 TAB visibility TAB data TAB time TAB version
 * TAB file_seq TAB line_no} ({@code loaders/dist_ch.py}), and a bucket file those lines then its
 * index ({@link BucketFile}: only the data part is read as lines); the merge rule's rank is (time,
 * version, file_seq, line_no), greater wins ({@code debl/format/link.py merge_rank}, cold rows only);
 * the row key is {@code id1 | link_type | MAX_TIME - time | 2^64-1 - id2}, 8 bytes big-endian
 * each, and the value {@code visibility (1 byte) | version (8 bytes) | data}
 * ({@code debl/store/hbase_layout.py}); the checksum of a winner is CRC-32 in the low and
 * Adler-32 in the high 32 bits of its canonical line with its newline, summed mod 2^64
 * ({@code debl/format/link.py row_checksum}).
 *
 * <p>Pitfalls: a bucket is merged in the task's memory (buckets are sized for this by {@code
 * bucket_target_bytes}); a line that does not parse means the bucket files are not dist_ch's and
 * fails the task with the file and line, rather than dropping the row.
 */
public final class BucketHFiles {
  private static final String TABLE_NAME_KEY = "hbase.mapreduce.hfileoutputformat.table.name";
  private static final String LOCALITY_KEY = "hbase.bulkload.locality.sensitive.enabled";
  private static final long MAX_TIME = Long.MAX_VALUE;

  private BucketHFiles() {}

  /**
   * Writes the HFiles of the given buckets under {@code outDir/<family>/}, replacing {@code
   * outDir}. {@code buckets}: the JSON array of the buckets, each the array of its path prefixes
   * (absolute URIs; the bucket's files are {@code <prefix>.<n>}: {@link BucketFile#stemOf}).
   * Returns the JSON array of what each bucket became, in order: {@code {"rows": rows read,
   * "winners": cells written, "checksum": the winners' checksum, mod 2^64 as a signed long}}.
   */
  public static String write(JavaSparkContext jsc, String buckets, String outDir, String tableName,
      byte[] family, byte[] qualifier, long cellTimestamp) throws IOException {
    List<String[]> prefixes = prefixes(buckets);
    Configuration conf = new Configuration(jsc.hadoopConfiguration());
    conf.set(TABLE_NAME_KEY, tableName);
    conf.set(LOCALITY_KEY, "false"); // a locality lookup would open a cluster connection per file
    // No _SUCCESS marker: the bulk-load tool would only warn that it skips it.
    conf.set("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false");
    Path out = new Path(outDir);
    FileSystem outFs = out.getFileSystem(conf);
    if (outFs.exists(out)) {
      outFs.delete(out, true); // a redo of a crashed run
    }
    CollectionAccumulator<long[]> stats = jsc.sc().collectionAccumulator("gen_HF buckets");
    List<Integer> indexes = new ArrayList<>();
    for (int i = 0; i < prefixes.size(); i++) {
      indexes.add(i);
    }
    JavaPairRDD<ImmutableBytesWritable, KeyValue> cells =
        jsc.parallelize(indexes, Math.max(1, indexes.size()))
            .mapPartitionsWithIndex(new Task(new HadoopSettings(conf), prefixes, family, qualifier,
                cellTimestamp, stats), true)
            .mapToPair(t -> t);
    cells.saveAsNewAPIHadoopFile(
        outDir, ImmutableBytesWritable.class, KeyValue.class, HFileOutputFormat2.class, conf);
    // Exact: the save is the job's result stage, where Spark merges each partition's
    // accumulator updates once (failed and speculative attempts are discarded).
    long[][] found = new long[prefixes.size()][];
    for (long[] s : stats.value()) {
      found[(int) s[0]] = s;
    }
    ObjectMapper json = new ObjectMapper();
    ArrayNode result = json.createArrayNode();
    for (long[] s : found) {
      result.addObject().put("rows", s[2]).put("winners", s[1]).put("checksum", s[3]);
    }
    return json.writeValueAsString(result);
  }

  private static List<String[]> prefixes(String buckets) {
    JsonNode doc;
    try {
      doc = new ObjectMapper().readTree(buckets);
    } catch (IOException e) {
      throw new IllegalArgumentException("not a JSON array of buckets: " + buckets, e);
    }
    List<String[]> out = new ArrayList<>();
    for (JsonNode bucket : doc) {
      String[] paths = new String[bucket.size()];
      for (int i = 0; i < paths.length; i++) {
        paths[i] = bucket.get(i).asText();
      }
      out.add(paths);
    }
    return out;
  }

  /** One bucket: read, merge, sort, then the cells in row-key order. */
  static final class Task
      implements Function2<Integer, Iterator<Integer>, Iterator<Tuple2<ImmutableBytesWritable, KeyValue>>> {
    private static final long serialVersionUID = 1L;
    private final HadoopSettings settings;
    private final List<String[]> buckets;
    private final byte[] family;
    private final byte[] qualifier;
    private final long cellTimestamp;
    private final CollectionAccumulator<long[]> stats;

    Task(HadoopSettings settings, List<String[]> buckets, byte[] family, byte[] qualifier,
        long cellTimestamp, CollectionAccumulator<long[]> stats) {
      this.settings = settings;
      this.buckets = new ArrayList<>(buckets);
      this.family = family;
      this.qualifier = qualifier;
      this.cellTimestamp = cellTimestamp;
      this.stats = stats;
    }

    @Override
    public Iterator<Tuple2<ImmutableBytesWritable, KeyValue>> call(
        Integer partition, Iterator<Integer> ignored) throws IOException {
      List<Row> rows = new ArrayList<>();
      Configuration conf = settings.configuration();
      for (Path file : files(buckets.get(partition), conf)) {
        readRows(file, file.getFileSystem(conf), rows);
      }
      List<Row> winners = merge(rows);
      stats.add(new long[] {partition, winners.size(), rows.size(), checksum(winners)});
      rows = null; // the losers can go before the cells are built
      Iterator<Row> it = winners.iterator();
      return new Iterator<Tuple2<ImmutableBytesWritable, KeyValue>>() {
        @Override
        public boolean hasNext() {
          return it.hasNext();
        }

        @Override
        public Tuple2<ImmutableBytesWritable, KeyValue> next() {
          Row r = it.next();
          byte[] key = r.rowKey();
          return new Tuple2<>(new ImmutableBytesWritable(key), new KeyValue(key, family,
              qualifier, cellTimestamp, KeyValue.Type.Put, r.value()));
        }
      };
    }
  }

  /**
   * The files {@code <prefix>.<n>} of the given prefixes, in name order; not a temporary
   * {@code <prefix>.<n>._COPYING_} left by a killed dist_ch. A bucket's prefixes (one per chunk)
   * share its directory: each directory is listed once.
   */
  static List<Path> files(String[] prefixes, Configuration conf) throws IOException {
    Map<Path, Set<String>> stems = new TreeMap<>();
    for (String prefix : prefixes) {
      Path path = new Path(prefix);
      stems.computeIfAbsent(path.getParent(), d -> new HashSet<>()).add(path.getName());
    }
    List<Path> found = new ArrayList<>();
    for (Map.Entry<Path, Set<String>> dir : stems.entrySet()) {
      FileSystem fs = dir.getKey().getFileSystem(conf);
      for (FileStatus status : fs.listStatus(dir.getKey())) {
        String stem = BucketFile.stemOf(status.getPath().getName());
        if (status.isFile() && stem != null && dir.getValue().contains(stem)) {
          found.add(status.getPath());
        }
      }
    }
    Collections.sort(found);
    return found;
  }

  /** A bucket line, parsed; {@code data} is a slice of the file's bytes. */
  static final class Row {
    long id1;
    long linkType;
    long id2;
    byte visibility;
    byte[] buf;
    int dataOff;
    int dataLen;
    long time;
    long version;
    long fileSeq;
    long lineNo;

    byte[] rowKey() {
      byte[] key = new byte[32];
      putLong(key, 0, id1);
      putLong(key, 8, linkType);
      putLong(key, 16, MAX_TIME - time);
      putLong(key, 24, ~id2); // 2^64-1 - id2
      return key;
    }

    byte[] value() {
      byte[] value = new byte[9 + dataLen];
      value[0] = visibility;
      putLong(value, 1, version);
      System.arraycopy(buf, dataOff, value, 9, dataLen);
      return value;
    }
  }

  static void putLong(byte[] b, int at, long v) {
    for (int i = 7; i >= 0; i--) {
      b[at + i] = (byte) v;
      v >>>= 8;
    }
  }

  static void readRows(Path file, FileSystem fs, List<Row> rows) throws IOException {
    long length = fs.getFileStatus(file).getLen();
    if (length > Integer.MAX_VALUE - 8) {
      throw new IOException(file + " is " + length + " bytes: too large for one bucket file");
    }
    byte[] buf = new byte[(int) length];
    try (InputStream in = fs.open(file)) {
      IOUtils.readFully(in, buf, 0, buf.length);
    }
    int data = BucketFile.dataLength(buf, file); // the lines; the index after them is not rows
    int lineNo = 0;
    int start = 0;
    while (start < data) {
      int end = start;
      while (end < data && buf[end] != '\n') {
        end++;
      }
      lineNo++;
      rows.add(parse(buf, start, end, file, lineNo));
      start = end + 1;
    }
  }

  /** One bucket line {@code [start, end)} (without its newline); 9 TAB-separated fields. */
  static Row parse(byte[] buf, int start, int end, Path file, int lineNo) throws IOException {
    int[] cuts = new int[8];
    int n = 0;
    for (int i = start; i < end; i++) {
      if (buf[i] == '\t') {
        if (n == 8) {
          throw bad(file, lineNo, "more than 9 fields");
        }
        cuts[n++] = i;
      }
    }
    if (n != 8) {
      throw bad(file, lineNo, "expected 9 tab-separated fields, found " + (n + 1));
    }
    Row r = new Row();
    r.id1 = number(buf, start, cuts[0], file, lineNo);
    r.linkType = number(buf, cuts[0] + 1, cuts[1], file, lineNo);
    r.id2 = number(buf, cuts[1] + 1, cuts[2], file, lineNo);
    long visibility = number(buf, cuts[2] + 1, cuts[3], file, lineNo);
    if (visibility > 1) {
      throw bad(file, lineNo, "visibility must be 0 or 1");
    }
    r.visibility = (byte) visibility;
    r.buf = buf;
    r.dataOff = cuts[3] + 1;
    r.dataLen = cuts[4] - r.dataOff;
    r.time = number(buf, cuts[4] + 1, cuts[5], file, lineNo);
    r.version = number(buf, cuts[5] + 1, cuts[6], file, lineNo);
    r.fileSeq = number(buf, cuts[6] + 1, cuts[7], file, lineNo);
    r.lineNo = number(buf, cuts[7] + 1, end, file, lineNo);
    return r;
  }

  static long number(byte[] buf, int from, int to, Path file, int lineNo) throws IOException {
    long v = DistCh.number(buf, from, to);
    if (v < 0) {
      throw bad(file, lineNo, "not a number within 0..2^63-1");
    }
    return v;
  }

  static IOException bad(Path file, int lineNo, String why) {
    return new IOException(file + " line " + lineNo + " is not a bucket line (" + why
        + "): the bucket files were not written by this version of dist_ch");
  }

  // Of one key, the greatest rank first: time, version, file, line (all cold, so no hot flag).
  private static final Comparator<Row> BY_KEY_THEN_RANK =
      Comparator.<Row>comparingLong(r -> r.id1)
          .thenComparingLong(r -> r.linkType)
          .thenComparingLong(r -> r.id2)
          .thenComparing(Comparator.<Row>comparingLong(r -> r.time)
              .thenComparingLong(r -> r.version)
              .thenComparingLong(r -> r.fileSeq)
              .thenComparingLong(r -> r.lineNo)
              .reversed());

  // The row-key order: id1, link_type, newest first, then id2 descending.
  private static final Comparator<Row> BY_ROW_KEY =
      Comparator.<Row>comparingLong(r -> r.id1)
          .thenComparingLong(r -> r.linkType)
          .thenComparing(Comparator.<Row>comparingLong(r -> r.time).reversed())
          .thenComparing(Comparator.<Row>comparingLong(r -> r.id2).reversed());

  /** One winner per (id1, link_type, id2), in row-key order. */
  static List<Row> merge(List<Row> rows) {
    rows.sort(BY_KEY_THEN_RANK);
    List<Row> winners = new ArrayList<>();
    Row previous = null;
    for (Row r : rows) {
      if (previous == null || r.id1 != previous.id1 || r.linkType != previous.linkType
          || r.id2 != previous.id2) {
        winners.add(r);
      }
      previous = r;
    }
    winners.sort(BY_ROW_KEY);
    return winners;
  }

  /** The sum mod 2^64 of each winner's canonical-line checksum. */
  static long checksum(List<Row> winners) {
    byte[] line = new byte[5 * 20 + 4 + 2 + DistCh.MAX_DATA + 6];
    LineChecksum checksum = new LineChecksum();
    long sum = 0;
    for (Row r : winners) {
      int n = DistCh.decimal(line, 0, r.id1);
      line[n++] = '\t';
      n = DistCh.decimal(line, n, r.linkType);
      line[n++] = '\t';
      n = DistCh.decimal(line, n, r.id2);
      line[n++] = '\t';
      line[n++] = (byte) ('0' + r.visibility);
      line[n++] = '\t';
      if (n + r.dataLen + 2 * 21 > line.length) { // data over MAX_DATA: not from dist_ch, but fine
        line = Arrays.copyOf(line, n + r.dataLen + 2 * 21);
      }
      System.arraycopy(r.buf, r.dataOff, line, n, r.dataLen);
      n += r.dataLen;
      line[n++] = '\t';
      n = DistCh.decimal(line, n, r.time);
      line[n++] = '\t';
      n = DistCh.decimal(line, n, r.version);
      sum += checksum.of(line, 0, n);
    }
    return sum;
  }
}
