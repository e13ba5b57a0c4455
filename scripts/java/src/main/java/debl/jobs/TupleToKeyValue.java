package debl.jobs;

import java.util.List;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.spark.api.python.Converter;

/**
 * PySpark value converter: a Python tuple {@code (row, family, qualifier, timestamp, value)} to
 * one {@code Put} {@link KeyValue} for {@code HFileOutputFormat2}.
 *
 * <p>Pyrolite unpickles a tuple as {@code Object[]} (a list as {@code java.util.List}, accepted
 * too), {@code bytes} as {@code byte[]}, and an int as {@code Integer}, {@code Long} or
 * {@code BigInteger} depending on its size, so the timestamp is taken as any {@link Number}.
 * A timestamp of {@code Long.MAX_VALUE} (HBase's LATEST_TIMESTAMP) would be replaced by the
 * writer's clock, so it is refused: cells must carry the timestamp the caller chose.
 */
public final class TupleToKeyValue implements Converter<Object, KeyValue> {
  private static final long serialVersionUID = 1L;

  @Override
  public KeyValue convert(Object obj) {
    Object[] fields;
    if (obj instanceof Object[]) {
      fields = (Object[]) obj;
    } else if (obj instanceof List) {
      fields = ((List<?>) obj).toArray();
    } else {
      throw new IllegalArgumentException(
          "expected a (row, family, qualifier, timestamp, value) tuple, got "
              + BytesToImmutableBytesWritable.describe(obj));
    }
    if (fields.length != 5) {
      throw new IllegalArgumentException(
          "expected a 5-tuple (row, family, qualifier, timestamp, value), got " + fields.length
              + " fields");
    }
    long ts = timestamp(fields[3]);
    return new KeyValue(bytes(fields[0], "row"), bytes(fields[1], "family"),
        bytes(fields[2], "qualifier"), ts, KeyValue.Type.Put, bytes(fields[4], "value"));
  }

  private static byte[] bytes(Object obj, String name) {
    if (obj instanceof byte[]) {
      return (byte[]) obj;
    }
    throw new IllegalArgumentException(
        name + " must be Python bytes (byte[]), got " + BytesToImmutableBytesWritable.describe(obj));
  }

  private static long timestamp(Object obj) {
    if (!(obj instanceof Integer || obj instanceof Long)) {
      // BigInteger (an int beyond 64 bits), float, None: never a valid HBase timestamp.
      throw new IllegalArgumentException(
          "timestamp must be a Python int within 0..2**63-2, got "
              + BytesToImmutableBytesWritable.describe(obj) + " " + obj);
    }
    long ts = ((Number) obj).longValue();
    if (ts < 0 || ts == HConstants.LATEST_TIMESTAMP) {
      throw new IllegalArgumentException("timestamp out of range 0..2**63-2: " + ts);
    }
    return ts;
  }
}
