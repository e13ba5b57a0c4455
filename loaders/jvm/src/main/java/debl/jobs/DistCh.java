package debl.jobs;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.Function;

/**
 * dist_ch's per-line work on the JVM: one Spark task per line-aligned slice of a chunk in HDFS
 * validates every line, gives it its origin, and writes one file per bucket it touches. Called
 * from Python ({@code loaders.dist_ch}) through py4j, which keeps the plan (slices, segments,
 * bucket map) and turns the results into bucket index rows and reject records.
 *
 * <p>Why on the JVM: in Python (split, validate, format, checksum per line) dist_ch bucketed
 * about 11-25 MB/s on 2 cores and was the slowest stage before uptime when the link is fast.
 *
 * <p>The rules mirror the Python definitions, which stay the reference (tests compare them): a
 * line is valid exactly when {@code debl.model.parse_line} accepts it ({@link #lineId1}); the
 * bucket file line is the input line, TAB file_seq, TAB line_no; a bucket file is those lines
 * sorted by (id1, link_type, time) with a sparse index as its footer ({@link BucketFile},
 * {@code debl/bucket_file.py}); the checksum of a line is
 * {@code debl.model.line_checksum} (CRC-32 low, Adler-32 high 32 bits, of the line with its
 * newline), summed mod 2^64. Rejected lines go back to the driver whole, which names the reason
 * with {@code parse_line} itself, so the reject file's wording has one source.
 *
 * <p>Pitfalls: a slice's output is held in the task's memory until written (about the slice's
 * size); files are written under {@code ._COPYING_} and renamed over the final name, so a re-run
 * of a chunk replaces exactly its own files and a killed one leaves no half file under a final
 * name.
 */
public final class DistCh {
  private static final int BLOCK = 4 << 20;
  private static final int WRITERS = 4; // small HDFS files cost a create/close round each
  static final int MAX_DATA = 255;
  /** The Hadoop setting that carries DeBL's {@code max_line_bytes} to the tasks. */
  static final String MAX_LINE_KEY = "debl.max.line.bytes";

  private DistCh() {}

  /**
   * The id1 of a valid line (without its newline; a final CR is the CR of its CRLF line end),
   * or -1 where {@code parse_line} would refuse it: not 7 TAB-separated fields, a number that is empty, not plain ASCII digits or over
   * 2^63-1, visibility other than 0 or 1, data over 255 bytes or holding a carriage return.
   */
  public static long lineId1(byte[] line) {
    return id1Of(line, 0, bodyEnd(line, 0, line.length));
  }

  /**
   * The end of a line's body: {@code end} (the newline's index, or the end of the data) less
   * the CR of a CRLF line end ({@code debl.model.line_body}: a CRLF file loads as its LF twin).
   */
  static int bodyEnd(byte[] buf, int start, int end) {
    return end > start && buf[end - 1] == '\r' ? end - 1 : end;
  }

  static long id1Of(byte[] buf, int start, int end) {
    return id1Of(buf, start, end, new int[6]);
  }

  /** {@link #id1Of}, leaving the positions of the line's six TABs in {@code tabs}. */
  static long id1Of(byte[] buf, int start, int end, int[] tabs) {
    int n = 0;
    for (int i = start; i < end; i++) {
      if (buf[i] == '\t') {
        if (n == 6) {
          return -1;
        }
        tabs[n++] = i;
      }
    }
    if (n != 6) {
      return -1;
    }
    long id1 = number(buf, start, tabs[0]);
    if (id1 < 0
        || number(buf, tabs[0] + 1, tabs[1]) < 0
        || number(buf, tabs[1] + 1, tabs[2]) < 0
        || number(buf, tabs[4] + 1, tabs[5]) < 0
        || number(buf, tabs[5] + 1, end) < 0) {
      return -1;
    }
    if (tabs[3] - tabs[2] != 2 || (buf[tabs[2] + 1] != '0' && buf[tabs[2] + 1] != '1')) {
      return -1;
    }
    if (tabs[4] - tabs[3] - 1 > MAX_DATA) {
      return -1;
    }
    for (int i = tabs[3] + 1; i < tabs[4]; i++) {
      if (buf[i] == '\r') {
        return -1;
      }
    }
    return id1;
  }

  /** Plain ASCII digits within 2^63-1 (leading zeros allowed, as Python's int()), else -1. */
  static long number(byte[] buf, int from, int to) {
    if (from == to) {
      return -1;
    }
    long v = 0;
    for (int i = from; i < to; i++) {
      int d = buf[i] - '0';
      if (d < 0 || d > 9 || v > (Long.MAX_VALUE - d) / 10) {
        return -1;
      }
      v = v * 10 + d;
    }
    return v;
  }

  /** Writes non-negative {@code v} in decimal at {@code at}; returns the end. */
  static int decimal(byte[] b, int at, long v) {
    int digits = 1;
    for (long t = v; t >= 10; t /= 10) {
      digits++;
    }
    for (int i = at + digits - 1; i >= at; i--) {
      b[i] = (byte) ('0' + v % 10);
      v /= 10;
    }
    return at + digits;
  }

  /**
   * Buckets one chunk: one task per slice writes the bucket file {@code
   * <bucketDir>/<b>/chunk-<NNNNN>.<slice>} (sorted, with its index footer: {@link BucketFile})
   * for every bucket {@code b} of its valid lines, {@code b} given by the bucket map
   * ({@link BucketMap}, its JSON in {@code bucketMap}). {@code slices}: one {@code <byte offset>
   * TAB <first chunk line>} line per slice. {@code segments}: one {@code <file_seq> TAB <first
   * line> TAB <lines> TAB <chunk line>} line per segment, in chunk order.
   * Returns, per slice, lines of four kinds:
   * {@code P <slice> <bucket> <rows> <bytes> <checksum, unsigned> <path> <lowest id1> <highest
   * id1>} per bucket file (the id1 span of its rows: the coordinator's cold coverage),
   * {@code R <slice> <file_seq> <line_no> <the line in hex>} per rejected line,
   * {@code L <slice> <file_seq> <line_no> <length> <its first bytes in hex>} per line over
   * {@value #MAX_LINE_KEY} bytes (see {@link Lines}),
   * {@code F <slice> <file_seq> <rows bucketed> <lines rejected>} per segment (TAB-separated).
   */
  public static String bucket(JavaSparkContext jsc, String chunkUri, String slices,
      String segments, String bucketMap, String bucketDir, int chunkNo) {
    BucketMap map = BucketMap.fromJson(bucketMap); // checked once, on the driver
    HadoopSettings settings = new HadoopSettings(jsc.hadoopConfiguration());
    long[][] plan = table(slices, 2);
    long[][] segs = table(segments, 4);
    List<Integer> indexes = indexes(plan.length);
    return String.join("\n", jsc.parallelize(indexes, indexes.size())
        .map((Function<Integer, String>) slice -> bucketSlice(
            settings.configuration(), chunkUri, plan, segs, slice, map, bucketDir, chunkNo))
        .collect());
  }

  private static String bucketSlice(Configuration conf, String chunkUri, long[][] plan,
      long[][] segs, int slice, BucketMap map, String bucketDir, int chunkNo)
      throws IOException, InterruptedException, ExecutionException {
    Map<Long, Output> buckets = new TreeMap<>();
    StringBuilder report = new StringBuilder();
    long[][] perFile = new long[segs.length][2];
    LineChecksum checksum = new LineChecksum();
    int[] tabs = new int[6];
    int seg = 0;
    long segEnd = segs[0][3] + segs[0][2];
    long index = plan[slice][1];
    try (Lines lines = open(conf, chunkUri, plan, slice)) {
      for (; lines.next(); index++) {
        while (index >= segEnd) {
          seg++;
          segEnd = segs[seg][3] + segs[seg][2];
        }
        long lineNo = segs[seg][1] + index - segs[seg][3];
        if (lines.tooLong) {
          perFile[seg][1]++;
          report.append("L\t").append(slice).append('\t').append(segs[seg][0]).append('\t')
              .append(lineNo).append('\t').append(lines.longLength).append('\t')
              .append(hex(lines.prefix, 0, lines.prefix.length)).append('\n');
          continue;
        }
        long id1 = id1Of(lines.buf, lines.start, lines.end, tabs);
        if (id1 < 0) {
          perFile[seg][1]++;
          report.append("R\t").append(slice).append('\t').append(segs[seg][0]).append('\t')
              .append(lineNo).append('\t').append(hex(lines.buf, lines.start, lines.end))
              .append('\n');
          continue;
        }
        perFile[seg][0]++;
        Output out = buckets.computeIfAbsent(map.bucketOf(id1), b -> new Output());
        out.lo = Math.min(out.lo, id1);
        out.hi = Math.max(out.hi, id1);
        // Valid, so both numbers parse: the line's sort key in the bucket file.
        out.startLine(id1, number(lines.buf, tabs[0] + 1, tabs[1]),
            number(lines.buf, tabs[4] + 1, tabs[5]));
        out.append(lines.buf, lines.start, lines.end);
        out.append((byte) '\t');
        out.appendDecimal(segs[seg][0]);
        out.append((byte) '\t');
        out.appendDecimal(lineNo);
        out.append((byte) '\n');
        out.checksum += checksum.of(lines.buf, lines.start, lines.end);
      }
    }
    ExecutorService pool = Executors.newFixedThreadPool(WRITERS);
    try {
      List<Future<String>> written = new ArrayList<>();
      for (Map.Entry<Long, Output> e : buckets.entrySet()) {
        long b = e.getKey();
        Output out = e.getValue();
        Path path = new Path(String.format("%s/%d/chunk-%05d.%d", bucketDir, b, chunkNo, slice));
        written.add(pool.submit(() -> {
          writeAtomic(conf, path, out);
          return "P\t" + slice + "\t" + b + "\t" + out.rows + "\t" + out.size + "\t"
              + Long.toUnsignedString(out.checksum) + "\t" + path.toUri().getPath() + "\t"
              + out.lo + "\t" + out.hi + "\n";
        }));
      }
      for (Future<String> f : written) {
        report.append(f.get());
      }
    } finally {
      pool.shutdownNow();
    }
    for (int s = 0; s < segs.length; s++) {
      report.append("F\t").append(slice).append('\t').append(segs[s][0]).append('\t')
          .append(perFile[s][0]).append('\t').append(perFile[s][1]).append('\n');
    }
    return report.toString();
  }

  private static void writeAtomic(Configuration conf, Path path, Output out) throws IOException {
    Path tmp = new Path(path.getParent(), path.getName() + "._COPYING_");
    FileContext fc = FileContext.getFileContext(path.toUri(), conf);
    try (FSDataOutputStream stream = fc.create(tmp,
        EnumSet.of(CreateFlag.CREATE, CreateFlag.OVERWRITE), Options.CreateOpts.createParent());
        OutputStream buffered = new BufferedOutputStream(stream, 1 << 16)) {
      BucketFile.write(buffered, out.data, out.size, out.starts, out.keys, out.rows);
    }
    fc.rename(tmp, path, Options.Rename.OVERWRITE);
  }

  /** A bucket's output of one slice: its lines in input order, each one's start and key. */
  private static final class Output {
    byte[] data = new byte[1 << 16];
    int size;
    int rows;
    int[] starts = new int[1 << 10];
    long[] keys = new long[3 << 10]; // id1, link_type, time per line
    long checksum; // mod 2^64 by overflow
    long lo = Long.MAX_VALUE; // the id1 span of the rows
    long hi = -1;

    void startLine(long id1, long linkType, long time) {
      if (rows == starts.length) {
        starts = Arrays.copyOf(starts, rows * 2);
        keys = Arrays.copyOf(keys, rows * 6);
      }
      starts[rows] = size;
      keys[3 * rows] = id1;
      keys[3 * rows + 1] = linkType;
      keys[3 * rows + 2] = time;
      rows++;
    }

    void append(byte b) {
      ensure(1);
      data[size++] = b;
    }

    void append(byte[] src, int from, int to) {
      ensure(to - from);
      System.arraycopy(src, from, data, size, to - from);
      size += to - from;
    }

    void appendDecimal(long v) {
      ensure(20);
      size = decimal(data, size, v);
    }

    private void ensure(int more) {
      if (size + more > data.length) {
        data = Arrays.copyOf(data, Math.max(data.length * 2, size + more));
      }
    }
  }

  /**
   * The lines of one slice, as {@code [start, end)} ranges of {@code buf}: the body of each line,
   * without its newline and without the CR of a CRLF line end.
   *
   * <p>Memory stays bounded whatever the input: a line longer than {@code maxLine} bytes is never
   * held whole. Once its unfinished part passes the limit it is read on to its newline and
   * dropped; {@link #next} then reports it with {@code tooLong} set, its length (without its
   * line end) in {@code longLength} and its first {@value #PREFIX} bytes in {@code prefix}, for
   * the reject file (docs/LOADING.md, "Bad input"). A line over the limit that happens to fit
   * the buffer is reported the same way, so the outcome never depends on where a line falls.
   */
  private static final class Lines implements AutoCloseable {
    static final int PREFIX = 1024; // debl.model.REJECT_PREFIX
    private final InputStream in;
    private final long maxLine;
    private final long hold; // the longest unfinished line kept in buf: the limit, CR, prefix
    private long remaining; // bytes of the slice not read yet; -1: to the end of the file
    byte[] buf;
    private int pos;
    private int scanned; // no newline in [pos, scanned)
    private int limit;
    private boolean eof;
    int start;
    int end;
    boolean tooLong;
    long longLength;
    byte[] prefix;

    Lines(InputStream in, long length, long maxLine) {
      this.in = in;
      this.remaining = length;
      this.maxLine = maxLine;
      this.hold = Math.max(maxLine, PREFIX) + 1;
      this.buf = new byte[BLOCK];
    }

    boolean next() throws IOException {
      tooLong = false;
      while (true) {
        for (int i = scanned; i < limit; i++) {
          if (buf[i] == '\n') {
            int from = pos;
            pos = scanned = i + 1;
            found(from, i);
            return true;
          }
        }
        scanned = limit;
        if (limit - pos > hold) {
          skipLongLine();
          return true;
        }
        if (eof) {
          if (pos < limit) { // a last line without a newline
            int from = pos;
            pos = scanned = limit;
            found(from, limit);
            return true;
          }
          return false;
        }
        fill();
      }
    }

    /** The line {@code buf[from, newline)}: its body, or its report if it is too long. */
    private void found(int from, int newline) {
      start = from;
      end = bodyEnd(buf, from, newline);
      if (end - start > maxLine) {
        tooLong = true;
        longLength = end - start;
        prefix = Arrays.copyOfRange(buf, start, start + (int) Math.min(PREFIX, end - start));
        end = start;
      }
    }

    /** Reads on to the end of the line at {@code pos}, which is longer than {@code hold}. */
    private void skipLongLine() throws IOException {
      prefix = Arrays.copyOfRange(buf, pos, pos + PREFIX);
      long length = 0;
      byte last = 0;
      while (true) {
        int i = pos;
        while (i < limit && buf[i] != '\n') {
          i++;
        }
        length += i - pos;
        if (i > pos) {
          last = buf[i - 1];
        }
        pos = scanned = i;
        if (i < limit) { // the newline
          pos = scanned = i + 1;
          break;
        }
        if (eof) {
          break;
        }
        fill(); // pos == limit: the buffer is reused from its start
      }
      tooLong = true;
      longLength = last == '\r' ? length - 1 : length;
      start = end = pos;
    }

    private void fill() throws IOException {
      if (pos > 0) {
        System.arraycopy(buf, pos, buf, 0, limit - pos);
        limit -= pos;
        scanned -= pos;
        pos = 0;
      }
      if (limit == buf.length) { // a line longer than the buffer, still within hold
        buf = Arrays.copyOf(buf, (int) Math.min(2L * buf.length, hold + 1));
      }
      int want = buf.length - limit;
      if (remaining >= 0) {
        want = (int) Math.min(want, remaining);
      }
      int n = want == 0 ? -1 : in.read(buf, limit, want);
      if (n < 0) {
        eof = true;
        return;
      }
      limit += n;
      if (remaining >= 0) {
        remaining -= n;
      }
    }

    @Override
    public void close() throws IOException {
      in.close();
    }
  }

  private static Lines open(Configuration conf, String chunkUri, long[][] plan, int slice)
      throws IOException {
    Path path = new Path(chunkUri);
    FileSystem fs = path.getFileSystem(conf);
    FSDataInputStream in = fs.open(path);
    in.seek(plan[slice][0]);
    long length = slice + 1 < plan.length ? plan[slice + 1][0] - plan[slice][0] : -1;
    long maxLine = conf.getLong(MAX_LINE_KEY, -1);
    if (maxLine <= 0) {
      throw new IllegalStateException(MAX_LINE_KEY + " is not set (loaders.dist_ch sets it)");
    }
    return new Lines(in, length, maxLine);
  }

  private static long[][] table(String text, int columns) {
    String[] rows = text.split("\n");
    long[][] table = new long[rows.length][];
    for (int i = 0; i < rows.length; i++) {
      String[] fields = rows[i].split("\t");
      if (fields.length != columns) {
        throw new IllegalArgumentException("expected " + columns + " fields: " + rows[i]);
      }
      table[i] = Arrays.stream(fields).mapToLong(Long::parseLong).toArray();
    }
    return table;
  }

  private static List<Integer> indexes(int n) {
    List<Integer> list = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      list.add(i);
    }
    return list;
  }

  private static String hex(byte[] buf, int from, int to) {
    StringBuilder s = new StringBuilder(2 * (to - from));
    for (int i = from; i < to; i++) {
      s.append(Character.forDigit((buf[i] >> 4) & 0xf, 16)).append(Character.forDigit(buf[i] & 0xf, 16));
    }
    return s.toString();
  }
}
