package debl.jobs;

import org.apache.hadoop.hbase.io.ImmutableBytesWritable;
import org.apache.spark.api.python.Converter;

/**
 * PySpark key converter: a Python {@code bytes} (unpickled by Pyrolite as {@code byte[]}) to the
 * {@link ImmutableBytesWritable} row key that {@code HFileOutputFormat2} expects.
 *
 * <p>The array is wrapped, not copied: Pyrolite hands over a fresh array per record.
 */
public final class BytesToImmutableBytesWritable implements Converter<Object, ImmutableBytesWritable> {
  private static final long serialVersionUID = 1L;

  @Override
  public ImmutableBytesWritable convert(Object obj) {
    if (obj instanceof byte[]) {
      return new ImmutableBytesWritable((byte[]) obj);
    }
    throw new IllegalArgumentException(
        "expected Python bytes (byte[]) as the row key, got " + describe(obj));
  }

  static String describe(Object obj) {
    return obj == null ? "None (null)" : obj.getClass().getName();
  }
}
