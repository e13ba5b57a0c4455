package debl.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.util.Arrays;

/**
 * The bucket map on the JVM: the mirror of {@code debl.format.bucket_map.BucketMap}, which stays the
 * reference (a test asks both for the same ids). Built from the map's JSON, {@code {"splits":
 * [s1, ...]}} (bucket 0 is {@code [0, s1 - 1]}, bucket b {@code [s_b, s_(b+1) - 1]}, the last
 * ends at 2^63-1; found by binary search) or {@code {"width": w}} (bucket {@code id1 / w}).
 *
 * <p>Pitfall: the last bucket's upper bound is clipped to {@link Long#MAX_VALUE}, never computed
 * as {@code (b + 1) * w - 1}, which overflows.
 */
public final class BucketMap implements Serializable {
  private static final long serialVersionUID = 1L;

  private final long[] splits;
  private final long width;

  private BucketMap(long[] splits, long width) {
    this.splits = splits;
    this.width = width;
  }

  /** The map of its JSON text; IllegalArgumentException for anything else. */
  public static BucketMap fromJson(String json) {
    JsonNode doc;
    try {
      doc = new ObjectMapper().readTree(json);
    } catch (IOException e) {
      throw new IllegalArgumentException("not a bucket map: " + json, e);
    }
    if (doc != null && doc.size() == 1 && doc.has("width") && doc.get("width").canConvertToLong()
        && doc.get("width").asLong() > 0) {
      return new BucketMap(new long[0], doc.get("width").asLong());
    }
    if (doc != null && doc.size() == 1 && doc.has("splits") && doc.get("splits").isArray()) {
      JsonNode list = doc.get("splits");
      long[] splits = new long[list.size()];
      for (int i = 0; i < splits.length; i++) {
        if (!list.get(i).canConvertToLong()) {
          throw new IllegalArgumentException("not a split point: " + list.get(i));
        }
        splits[i] = list.get(i).asLong();
        if (splits[i] <= (i == 0 ? 0 : splits[i - 1])) {
          throw new IllegalArgumentException("split points must rise strictly from 1: " + json);
        }
      }
      return new BucketMap(splits, 0);
    }
    throw new IllegalArgumentException("not a bucket map (want splits or width): " + json);
  }

  /** The bucket of {@code id1} (0 to 2^63-1). */
  public long bucketOf(long id1) {
    if (width > 0) {
      return id1 / width;
    }
    int i = Arrays.binarySearch(splits, id1);
    return i >= 0 ? i + 1 : -i - 1; // the number of split points at or below id1
  }

  /** The lowest id1 of bucket {@code b}. */
  public long kLo(long b) {
    if (width > 0) {
      return b * width;
    }
    return b == 0 ? 0 : splits[(int) b - 1];
  }

  /** The highest id1 of bucket {@code b} (inclusive). */
  public long kHi(long b) {
    if (width > 0) {
      long lo = b * width;
      return lo > Long.MAX_VALUE - (width - 1) ? Long.MAX_VALUE : lo + width - 1;
    }
    return b < splits.length ? splits[(int) b] - 1 : Long.MAX_VALUE;
  }
}
