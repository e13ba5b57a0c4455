package debl.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedOutputStream;
import java.io.IOException;
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
 * from Python through py4j ({@code loaders/jobs.py}); {@code loaders.dist_ch} keeps the plan
 * (slices, segments, bucket map, line limit) and turns the slices' reports into bucket index
 * rows and reject records.
 *
 * <p>Why on the JVM: in Python (split, validate, format, checksum per line) dist_ch bucketed
 * about 11-25 MB/s on 2 cores and was the slowest stage before uptime when the wire is fast.
 *
 * <p>The rules mirror the Python definitions, which stay the reference (tests compare them): a
 * line is valid exactly when {@code debl.format.link.parse_line} accepts it ({@link #lineId1}); the
 * bucket file line is the input line, TAB file_seq, TAB the line's byte offset in its file; a bucket file is those lines
 * sorted by (id1, link_type, time) with a sparse index as its footer ({@link BucketFile},
 * {@code debl/format/bucket_file.py}); the checksum of a line is
 * {@code debl.format.link.line_checksum} (CRC-32 low, Adler-32 high 32 bits, of the line with its
 * newline), summed mod 2^64. Rejected lines go back to the driver whole, which names the reason
 * with {@code parse_line} itself, so the reject file's wording has one source.
 *
 * <p>Pitfalls: a slice's output is held in the task's memory until written (about the slice's
 * size); files are written under {@code ._COPYING_} and renamed over the final name, so a re-run
 * of a chunk replaces exactly its own files and a killed one leaves no half file under a final
 * name.
 */
public final class DistCh {
  private static final int WRITERS = 4; // small HDFS files cost a create/close round each
  static final int MAX_DATA = 255;

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
   * the CR of a CRLF line end ({@code debl.format.link.line_body}: a CRLF file loads as its LF twin).
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
   * Buckets one chunk, one Spark task per slice, as {@code plan} says ({@link Plan}: the JSON
   * document of {@code loaders/jobs.py}'s {@code DistChRequest}). Returns the JSON array of the
   * slices' reports, in slice order, each {@code {"slice", "parts": [[bucket, rows, bytes,
   * checksum, lowest id1, highest id1], ...], "rejects": [[file_seq, line_no, the line in
   * base64], ...], "too_long": [[file_seq, line_no, length, its first bytes in base64], ...],
   * "per_file": [[file_seq, rows bucketed, lines refused], ...]}} (a checksum mod 2^64 as a
   * signed long): read by {@code loaders/jobs.py} only.
   */
  public static String bucket(JavaSparkContext jsc, String plan) {
    int slices = Plan.fromJson(plan).slices.length; // checked once, on the driver
    HadoopSettings settings = new HadoopSettings(jsc.hadoopConfiguration());
    List<Integer> indexes = new ArrayList<>();
    for (int i = 0; i < slices; i++) {
      indexes.add(i);
    }
    return "[" + String.join(",", jsc.parallelize(indexes, slices)
        .map((Function<Integer, String>) slice -> bucketSlice(
            settings.configuration(), Plan.fromJson(plan), slice).toJson(slice))
        .collect()) + "]";
  }

  /**
   * Buckets slice {@code slice} of the chunk that {@code plan} describes: writes, for every bucket
   * {@code b} of its valid lines ({@code b} from the plan's bucket map), the bucket file {@code
   * <bucketDir>/<b>/}{@link BucketFile#fileName} (sorted, with its index footer: {@link
   * BucketFile}), and returns what it wrote and what it refused. Runs in a Spark task.
   */
  static SliceReport bucketSlice(Configuration conf, Plan plan, int slice)
      throws IOException, InterruptedException, ExecutionException {
    Map<Long, Output> buckets = new TreeMap<>();
    SliceReport report = new SliceReport();
    long[][] segs = plan.segments;
    long[][] perFile = new long[segs.length][2];
    LineChecksum checksum = new LineChecksum();
    int[] tabs = new int[6];
    int seg = 0;
    long segEnd = segs[0][3] + segs[0][2];
    long index = plan.slices[slice][1];
    long sliceStart = plan.slices[slice][0];
    Claims[] claims = plan.claims(slice);
    try (LineReader lines = open(conf, plan, slice)) {
      for (; lines.next(); index++) {
        // A line past the plan's last one (a last line without its newline that the copy did
        // not count: chunks copied by older DeBL versions) stays in the last segment, as in
        // loaders.local_dist_ch: one more line of its file, never a walk past the segments.
        while (index >= segEnd && seg + 1 < segs.length) {
          seg++;
          segEnd = segs[seg][3] + segs[seg][2];
        }
        long lineNo = segs[seg][1] + index - segs[seg][3];
        // The origin's position: the line's byte offset in its file (docs/ONLINE.md, "Bucket
        // files"), which pieces copied out of file order know without counting lines.
        long position = segs[seg][4] + sliceStart + lines.lineStart - segs[seg][5];
        if (claims[seg] != null) {
          claims[seg].line(position, lines.tooLong ? -1 : id1Of(lines.buf, lines.start,
              lines.end, tabs));
        }
        if (lines.tooLong) {
          perFile[seg][1]++;
          report.tooLong.add(new TooLong(segs[seg][0], lineNo, lines.longLength, lines.prefix));
          continue;
        }
        long id1 = id1Of(lines.buf, lines.start, lines.end, tabs);
        if (id1 < 0) {
          perFile[seg][1]++;
          report.rejects.add(new Rejected(segs[seg][0], lineNo,
              Arrays.copyOfRange(lines.buf, lines.start, lines.end)));
          continue;
        }
        perFile[seg][0]++;
        Output out = buckets.computeIfAbsent(plan.map.bucketOf(id1), b -> new Output());
        out.lo = Math.min(out.lo, id1);
        out.hi = Math.max(out.hi, id1);
        // Valid, so both numbers parse: the line's sort key in the bucket file.
        out.startLine(id1, number(lines.buf, tabs[0] + 1, tabs[1]),
            number(lines.buf, tabs[4] + 1, tabs[5]));
        out.append(lines.buf, lines.start, lines.end);
        out.append((byte) '\t');
        out.appendDecimal(segs[seg][0]);
        out.append((byte) '\t');
        out.appendDecimal(position);
        out.append((byte) '\n');
        out.checksum += checksum.of(lines.buf, lines.start, lines.end);
      }
    }
    ExecutorService pool = Executors.newFixedThreadPool(WRITERS);
    try {
      List<Future<Part>> written = new ArrayList<>();
      for (Map.Entry<Long, Output> e : buckets.entrySet()) {
        long b = e.getKey();
        Output out = e.getValue();
        Path path = new Path(plan.bucketDir + "/" + b, BucketFile.fileName(plan.chunkNo, slice));
        written.add(pool.submit(() -> {
          writeAtomic(conf, path, out);
          return new Part(b, out.rows, out.size, out.checksum, out.lo, out.hi);
        }));
      }
      for (Future<Part> f : written) {
        report.parts.add(f.get());
      }
    } finally {
      pool.shutdownNow();
    }
    for (int s = 0; s < segs.length; s++) {
      report.perFile.add(new FileCount(segs[s][0], perFile[s][0], perFile[s][1]));
      if (claims[s] != null) {
        long[] v = claims[s].end();
        if (v != null) {
          report.violations.add(new long[] {s, v[0], v[1], v[2], v[3], v[4]});
        }
      }
    }
    return report;
  }

  /** A bucket file written: its rows, bytes (of the lines), checksum (mod 2^64) and id1 span. */
  record Part(long bucket, long rows, long bytes, long checksum, long lo, long hi) {}

  /** A line {@code parse_line} refuses, whole (without its line end). */
  record Rejected(long fileSeq, long lineNo, byte[] line) {}

  /** A line over the plan's line limit: its length and first {@value LineReader#PREFIX} bytes. */
  record TooLong(long fileSeq, long lineNo, long length, byte[] prefix) {}

  /** Of one segment's lines in the slice: those bucketed and those refused. */
  record FileCount(long fileSeq, long rows, long rejects) {}

  /** What one slice wrote and refused. */
  static final class SliceReport {
    final List<Part> parts = new ArrayList<>();
    final List<Rejected> rejects = new ArrayList<>();
    final List<TooLong> tooLong = new ArrayList<>();
    final List<FileCount> perFile = new ArrayList<>();
    final List<long[]> violations = new ArrayList<>(); // segment, then Claims.end()'s five

    /** The report as {@link #bucket} returns it. */
    String toJson(int slice) throws IOException {
      ObjectMapper json = new ObjectMapper();
      ObjectNode doc = json.createObjectNode().put("slice", slice);
      ArrayNode out = doc.putArray("parts");
      for (Part p : parts) {
        out.addArray().add(p.bucket()).add(p.rows()).add(p.bytes()).add(p.checksum())
            .add(p.lo()).add(p.hi());
      }
      out = doc.putArray("rejects");
      for (Rejected r : rejects) {
        out.addArray().add(r.fileSeq()).add(r.lineNo()).add(r.line());
      }
      out = doc.putArray("too_long");
      for (TooLong t : tooLong) {
        out.addArray().add(t.fileSeq()).add(t.lineNo()).add(t.length()).add(t.prefix());
      }
      out = doc.putArray("per_file");
      for (FileCount f : perFile) {
        out.addArray().add(f.fileSeq()).add(f.rows()).add(f.rejects());
      }
      out = doc.putArray("violations");
      for (long[] v : violations) {
        ArrayNode row = out.addArray();
        for (long x : v) {
          row.add(x);
        }
      }
      return json.writeValueAsString(doc);
    }
  }

  /**
   * What dist_ch is asked to do with one chunk: the JSON document {@code loaders/jobs.py}
   * ({@code DistChRequest}) sends, {@code {"chunk_uri", "slices": [[byte offset, first chunk
   * line], ...], "segments": [[file_seq, first line, lines, chunk line, first byte in the file, first byte in
   * the chunk], ...] (in chunk order),
   * "bucket_map": {...} (BucketMap's JSON), "bucket_dir", "chunk_no", "max_line_bytes"}}.
   */
  static final class Plan {
    final String chunkUri;
    final long[][] slices;
    final long[][] segments;
    final BucketMap map;
    final String bucketDir;
    final int chunkNo;
    final long maxLineBytes;
    private final JsonNode claims; // per segment: null, or what its manifest claims

    private Plan(JsonNode doc) {
      chunkUri = field(doc, "chunk_uri").asText();
      slices = table(field(doc, "slices"), 2);
      segments = table(field(doc, "segments"), 6);
      map = BucketMap.fromJson(field(doc, "bucket_map").toString());
      bucketDir = field(doc, "bucket_dir").asText();
      chunkNo = field(doc, "chunk_no").asInt();
      maxLineBytes = field(doc, "max_line_bytes").asLong();
      claims = doc.get("claims");
      if (slices.length == 0 || segments.length == 0 || maxLineBytes <= 0) {
        throw new IllegalArgumentException("a dist_ch plan needs slices, segments and a line "
            + "limit: " + doc);
      }
    }

    /**
     * The claim checkers of slice {@code slice}'s segments (null where the plan checks none):
     * each checks the lines of its segment that lie in the slice, and the points there.
     */
    Claims[] claims(int slice) {
      Claims[] out = new Claims[segments.length];
      if (claims == null || claims.isNull()) {
        return out;
      }
      long sliceStart = slices[slice][0];
      long sliceEnd = slice + 1 < slices.length ? slices[slice + 1][0] : Long.MAX_VALUE;
      for (int s = 0; s < segments.length; s++) {
        JsonNode c = claims.get(s);
        if (c == null || c.isNull()) {
          continue;
        }
        // The slice's bytes of this segment, in the file's offsets.
        long chunkStart = segments[s][5];
        long chunkEnd = s + 1 < segments.length ? segments[s + 1][5] : Long.MAX_VALUE;
        long from = Math.max(chunkStart, sliceStart);
        long to = Math.min(chunkEnd, sliceEnd);
        if (from >= to) {
          continue;
        }
        long fileStart = segments[s][4] + from - chunkStart;
        long fileEnd = to == Long.MAX_VALUE ? Long.MAX_VALUE : segments[s][4] + to - chunkStart;
        out[s] = new Claims(c, fileStart, fileEnd);
      }
      return out;
    }

    static Plan fromJson(String json) {
      try {
        return new Plan(new ObjectMapper().readTree(json));
      } catch (IOException e) {
        throw new IllegalArgumentException("not a dist_ch plan: " + json, e);
      }
    }

    private static JsonNode field(JsonNode doc, String name) {
      JsonNode value = doc == null ? null : doc.get(name);
      if (value == null) {
        throw new IllegalArgumentException("a dist_ch plan without " + name + ": " + doc);
      }
      return value;
    }

    private static long[][] table(JsonNode rows, int columns) {
      long[][] table = new long[rows.size()][];
      for (int i = 0; i < table.length; i++) {
        JsonNode row = rows.get(i);
        if (!row.isArray() || row.size() != columns) {
          throw new IllegalArgumentException("expected " + columns + " numbers: " + row);
        }
        table[i] = new long[columns];
        for (int c = 0; c < columns; c++) {
          table[i][c] = row.get(c).asLong();
        }
      }
      return table;
    }
  }

  /**
   * What a file's manifest claims about the lines of one segment's bytes in a slice, checked
   * line by line as {@code debl.keys.manifest.claim_violations} checks them (the reference): every
   * valid line's id1 within the file's {@code [lo, hi]} and within its piece's claim (from the
   * point at or before the line to the next one: {@code cuts}, then {@code after}); in a sorted
   * file, each id1 not below the one before; and every point in the bytes checked the start of
   * a valid line with the point's id1. {@link #end} gives the first violation: {offset, id1 (-1
   * for a point without its line), kind (1 file range, 2 piece claim, 3 order, 4 point id1, 5
   * point not a line start), claimed lo, claimed hi}.
   */
  static final class Claims {
    private final long lo;
    private final long hi;
    private final boolean sorted;
    private final long[] cutAt; // points at or before the bytes' end, by offset
    private final long[] cutId;
    private final long after; // the claim's top past the last cut
    private final long from;
    private final long to;
    private int piece = -1; // the last cut at or before the current line
    private int next; // the next point within [from, to) not met yet
    private long prev = -1;
    private long[] found;

    Claims(JsonNode c, long from, long to) {
      lo = c.get("lo").asLong();
      hi = c.get("hi").asLong();
      sorted = c.get("sorted").asBoolean();
      after = c.get("after").asLong();
      JsonNode cuts = c.get("cuts");
      cutAt = new long[cuts.size()];
      cutId = new long[cuts.size()];
      for (int i = 0; i < cutAt.length; i++) {
        cutAt[i] = cuts.get(i).get(0).asLong();
        cutId[i] = cuts.get(i).get(1).asLong();
      }
      this.from = from;
      this.to = to;
      while (next < cutAt.length && cutAt[next] < from) {
        next++;
      }
    }

    /** The line at file offset {@code at}, with {@code id1} (-1: not a valid line). */
    void line(long at, long id1) {
      if (found != null) {
        return;
      }
      if (next < cutAt.length && cutAt[next] < at && cutAt[next] < to) {
        found = missing(next);
        return;
      }
      while (piece + 1 < cutAt.length && cutAt[piece + 1] <= at) {
        piece++;
      }
      long claimLo = piece < 0 ? lo : cutId[piece];
      long claimHi = piece + 1 < cutAt.length ? cutId[piece + 1] : after;
      boolean point = next < cutAt.length && cutAt[next] == at;
      if (id1 < 0) {
        if (point) {
          found = missing(next);
        }
        return;
      }
      if (id1 < lo || id1 > hi) {
        found = new long[] {at, id1, 1, lo, hi};
      } else if (sorted && (id1 < claimLo || id1 > claimHi)) {
        found = new long[] {at, id1, 2, claimLo, claimHi};
      } else if (sorted && id1 < prev) {
        found = new long[] {at, id1, 3, claimLo, claimHi};
      } else if (point && cutId[next] != id1) {
        found = new long[] {at, id1, 4, claimLo, claimHi};
      }
      if (point) {
        next++;
      }
      prev = id1;
    }

    private long[] missing(int k) {
      return new long[] {cutAt[k], -1, 5, k > 0 ? cutId[k - 1] : lo, cutId[k]};
    }

    long[] end() {
      if (found == null && next < cutAt.length && cutAt[next] < to) {
        found = missing(next);
      }
      return found;
    }
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

  private static LineReader open(Configuration conf, Plan plan, int slice) throws IOException {
    Path path = new Path(plan.chunkUri);
    FileSystem fs = path.getFileSystem(conf);
    FSDataInputStream in = fs.open(path);
    in.seek(plan.slices[slice][0]);
    long length = slice + 1 < plan.slices.length
        ? plan.slices[slice + 1][0] - plan.slices[slice][0] : -1;
    return new LineReader(in, length, plan.maxLineBytes);
  }
}
