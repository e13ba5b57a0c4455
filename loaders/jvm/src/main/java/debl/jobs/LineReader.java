package debl.jobs;

import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;

/**
 * The lines of one slice, as {@code [start, end)} ranges of {@code buf}: the body of each line,
 * without its newline and without the CR of a CRLF line end.
 *
 * <p>Memory stays bounded whatever the input: a line longer than {@code maxLine} bytes is never
 * held whole. Once its unfinished part passes the limit it is read on to its newline and
 * dropped; {@link #next} then reports it with {@code tooLong} set, its length (without its
 * line end) in {@code longLength} and its first {@value #PREFIX} bytes in {@code prefix}, for
 * the reject file (docs/RELIABILITY.md, "An over-long line, in bounded memory"). A line over
 * the limit that happens to fit the buffer is reported the same way, so the outcome never
 * depends on where a line falls.
 */
final class LineReader implements AutoCloseable {
  static final int PREFIX = 1024; // debl.format.link.REJECT_PREFIX
  private static final int BLOCK = 4 << 20;
  private final InputStream in;
  private final long maxLine;
  private final long hold; // the longest unfinished line kept in buf: the limit, CR, prefix
  private long remaining; // bytes of the slice not read yet; -1: to the end of the file
  byte[] buf;
  private int pos;
  private int scanned; // no newline in [pos, scanned)
  private int limit;
  private boolean eof;
  private long shifted; // bytes of the slice dropped from buf's front by fill()
  int start;
  int end;
  long lineStart; // the current line's first byte, as an offset from the slice's start
  boolean tooLong;
  long longLength;
  byte[] prefix;

  LineReader(InputStream in, long length, long maxLine) {
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
    lineStart = shifted + from;
    start = from;
    end = DistCh.bodyEnd(buf, from, newline);
    if (end - start > maxLine) {
      tooLong = true;
      longLength = end - start;
      prefix = Arrays.copyOfRange(buf, start, start + (int) Math.min(PREFIX, end - start));
      end = start;
    }
  }

  /** Reads on to the end of the line at {@code pos}, which is longer than {@code hold}. */
  private void skipLongLine() throws IOException {
    lineStart = shifted + pos;
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
      shifted += pos;
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
