package debl.jobs;

import java.util.zip.Adler32;
import java.util.zip.CRC32;

/**
 * {@code debl.format.link.line_checksum} on the JVM: CRC-32 in the low and Adler-32 in the high 32 bits
 * of a line with its newline; sums of these mod 2^64 (a {@code long} that overflows) are the
 * bucket index's order-independent checksums. Not thread-safe: one per task.
 */
final class LineChecksum {
  private final CRC32 crc = new CRC32();
  private final Adler32 adler = new Adler32();

  /** The checksum of {@code buf[from, to)}, a line given without its newline. */
  long of(byte[] buf, int from, int to) {
    crc.reset();
    crc.update(buf, from, to - from);
    crc.update('\n');
    adler.reset();
    adler.update(buf, from, to - from);
    adler.update('\n');
    return crc.getValue() | (adler.getValue() << 32);
  }
}
