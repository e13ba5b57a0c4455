package debl.jobs;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.zip.CRC32;
import org.apache.hadoop.fs.Path;

/**
 * The bucket file format on the JVM: dist_ch writes it, gen_HF reads it. {@code
 * debl/format/bucket_file.py} is the reference (its {@code encode} gives the same bytes for the same
 * lines: tested): the data (the bucket lines sorted by id1, link_type, time, stably), then the
 * sparse index (one 32-byte entry {@code id1, link_type, time, offset} per block of about {@link
 * #BLOCK} bytes, and one for the last line with the data's length), then a Bloom filter of the
 * (id1, link_type) keys ({@link #bloomHash}), then a 40-byte trailer (data length, rows,
 * entries, filter bytes, CRC-32 of index and filter, hashes, {@link #MAGIC}); all big-endian.
 *
 * <p>The index is a footer, so one rename publishes the data and its index together
 * (docs/ONLINE.md, "Bucket files").
 */
final class BucketFile {
  static final int BLOCK = 64 << 10;
  static final byte[] MAGIC = "DEBLBKT1".getBytes(StandardCharsets.US_ASCII);
  static final int ENTRY = 32;
  static final int TRAILER = 40;
  static final int BLOOM_BITS_PER_KEY = 10;
  static final int BLOOM_HASHES = 7;
  private static final int INSERTION = 16; // below this a run is sorted by insertion

  private BucketFile() {}

  /**
   * The name of the bucket file that slice {@code slice} of chunk {@code chunkNo} writes into a
   * bucket's directory: {@code chunk-NNNNN.<slice>}, the chunk's name (five digits or more, as
   * {@code loaders.chunker.chunk_name}) and the slice. {@link #stemOf} reads it back.
   */
  static String fileName(int chunkNo, int slice) {
    return String.format("chunk-%05d.%d", chunkNo, slice);
  }

  /**
   * The stem of a bucket file's name ({@code <stem>.<digits>}, the stem a chunk's name), or null
   * for any other name, such as a dist_ch temporary {@code <stem>.<slice>._COPYING_}
   * ({@code debl.format.bucket_file.is_bucket_file}).
   */
  static String stemOf(String name) {
    int dot = name.lastIndexOf('.');
    if (dot <= 0 || dot == name.length() - 1) {
      return null;
    }
    for (int i = dot + 1; i < name.length(); i++) {
      if (name.charAt(i) < '0' || name.charAt(i) > '9') {
        return null;
      }
    }
    return name.substring(0, dot);
  }

  /**
   * Writes {@code rows} lines, line i being {@code data[starts[i], starts[i+1])} (the last one
   * ending at {@code size}) with sort key {@code keys[3i..3i+2]}, as a bucket file. Returns the
   * bytes of the index and trailer written after the data.
   */
  static int write(OutputStream out, byte[] data, int size, int[] starts, long[] keys, int rows)
      throws IOException {
    int[] order = sortedOrder(keys, rows);
    int distinct = 0;
    for (int r = 0; r < rows; r++) {
      if (r == 0 || !sameKey(keys, order[r - 1], order[r])) {
        distinct++;
      }
    }
    byte[] bloom = new byte[rows == 0 ? 0
        : (int) Math.max(8, (distinct * (long) BLOOM_BITS_PER_KEY + 7) / 8)];
    ByteArrayOutputStream indexBytes = new ByteArrayOutputStream();
    DataOutputStream index = new DataOutputStream(indexBytes);
    long written = 0;
    long blockStart = 0;
    for (int r = 0; r < rows; r++) {
      int i = order[r];
      if (r == 0 || written >= blockStart + BLOCK) {
        blockStart = written;
        entry(index, keys, i, written);
      }
      if (r == 0 || !sameKey(keys, order[r - 1], i)) {
        setBloom(bloom, keys[3 * i], keys[3 * i + 1]);
      }
      int from = starts[i];
      int to = i + 1 < rows ? starts[i + 1] : size;
      out.write(data, from, to - from);
      written += to - from;
    }
    if (rows > 0) {
      entry(index, keys, order[rows - 1], written);
    }
    byte[] entries = indexBytes.toByteArray();
    CRC32 crc = new CRC32();
    crc.update(entries);
    crc.update(bloom);
    DataOutputStream tail = new DataOutputStream(out);
    tail.write(entries);
    tail.write(bloom);
    tail.writeLong(written);
    tail.writeLong(rows);
    tail.writeInt(entries.length / ENTRY);
    tail.writeInt(bloom.length);
    tail.writeInt((int) crc.getValue());
    tail.writeInt(BLOOM_HASHES);
    tail.write(MAGIC);
    tail.flush();
    return entries.length + bloom.length + TRAILER;
  }

  private static boolean sameKey(long[] keys, int x, int y) {
    return keys[3 * x] == keys[3 * y] && keys[3 * x + 1] == keys[3 * y + 1];
  }

  /** SplitMix64's finalizer. */
  private static long mix(long x) {
    x = (x ^ (x >>> 30)) * 0xBF58476D1CE4E5B9L;
    x = (x ^ (x >>> 27)) * 0x94D049BB133111EBL;
    return x ^ (x >>> 31);
  }

  /** The 64-bit hash of a key whose halves give the filter's bit positions (double hashing). */
  static long bloomHash(long id1, long linkType) {
    return mix(id1 + mix(linkType));
  }

  private static void setBloom(byte[] bloom, long id1, long linkType) {
    long h = bloomHash(id1, linkType);
    long h1 = h & 0xFFFFFFFFL;
    long h2 = (h >>> 32) | 1;
    long bits = bloom.length * 8L;
    for (int i = 0; i < BLOOM_HASHES; i++) {
      long bit = (h1 + i * h2) % bits;
      bloom[(int) (bit >>> 3)] |= (byte) (1 << (bit & 7));
    }
  }

  private static void entry(DataOutputStream index, long[] keys, int i, long offset)
      throws IOException {
    index.writeLong(keys[3 * i]);
    index.writeLong(keys[3 * i + 1]);
    index.writeLong(keys[3 * i + 2]);
    index.writeLong(offset);
  }

  /**
   * The length of the data part of a whole bucket file in {@code buf}, after checking its
   * trailer, the file's length and the index's CRC; an IOException naming the file otherwise.
   */
  static int dataLength(byte[] buf, Path file) throws IOException {
    int n = buf.length;
    if (n < TRAILER
        || !Arrays.equals(MAGIC, 0, MAGIC.length, buf, n - MAGIC.length, n)) {
      throw new IOException(file + " has no bucket index (no DEBLBKT1 trailer): not written by"
          + " this version of dist_ch; reload the input");
    }
    ByteBuffer b = ByteBuffer.wrap(buf);
    long dataLength = b.getLong(n - 40);
    int entries = b.getInt(n - 24);
    int bloom = b.getInt(n - 20);
    int crc = b.getInt(n - 16);
    long need = TRAILER + (long) entries * ENTRY + bloom;
    CRC32 actual = new CRC32();
    if (entries >= 0 && bloom >= 0 && dataLength + need == n) {
      actual.update(buf, (int) dataLength, (int) (need - TRAILER));
    }
    if (entries < 0 || bloom < 0 || dataLength + need != n || (int) actual.getValue() != crc) {
      throw new IOException(file + ": its bucket index does not match the file (" + n
          + " bytes, index for " + dataLength + " data bytes): the file is damaged; run debl"
          + " verify, then reload the input");
    }
    return (int) dataLength;
  }

  /** The rows' indexes in (id1, link_type, time) order, stable; keys: 3 per row. */
  static int[] sortedOrder(long[] keys, int rows) {
    int[] order = new int[rows];
    for (int i = 0; i < rows; i++) {
      order[i] = i;
    }
    mergeSort(order, new int[rows], 0, rows, keys);
    return order;
  }

  // Stable: on equal keys the left run's row goes first. Dumps often come sorted by id1 (debl
  // generate's files are), so runs already in order are detected and not merged.
  private static void mergeSort(int[] a, int[] tmp, int lo, int hi, long[] keys) {
    if (hi - lo <= INSERTION) {
      for (int i = lo + 1; i < hi; i++) {
        int x = a[i];
        int j = i - 1;
        for (; j >= lo && compare(keys, a[j], x) > 0; j--) {
          a[j + 1] = a[j];
        }
        a[j + 1] = x;
      }
      return;
    }
    int mid = (lo + hi) >>> 1;
    mergeSort(a, tmp, lo, mid, keys);
    mergeSort(a, tmp, mid, hi, keys);
    if (compare(keys, a[mid - 1], a[mid]) <= 0) {
      return;
    }
    System.arraycopy(a, lo, tmp, lo, hi - lo);
    int i = lo;
    int j = mid;
    int k = lo;
    while (i < mid && j < hi) {
      a[k++] = compare(keys, tmp[j], tmp[i]) < 0 ? tmp[j++] : tmp[i++];
    }
    while (i < mid) {
      a[k++] = tmp[i++];
    }
    while (j < hi) {
      a[k++] = tmp[j++];
    }
  }

  private static int compare(long[] keys, int x, int y) {
    int c = Long.compare(keys[3 * x], keys[3 * y]);
    if (c == 0) {
      c = Long.compare(keys[3 * x + 1], keys[3 * y + 1]);
    }
    return c != 0 ? c : Long.compare(keys[3 * x + 2], keys[3 * y + 2]);
  }
}
