package debl.jobs;

import java.io.IOException;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.tool.BulkLoadHFiles;

/**
 * Bulk-loads a directory written by {@code HFileOutputFormat2} ({@code dir/<family>/<hfile>})
 * into an existing HBase table, from Python through py4j.
 *
 * <p>The configuration is HBase's defaults ({@code hbase-default.xml} from the shaded jar) plus
 * the given entries (ZooKeeper quorum and port, {@code fs.defaultFS}, ...); nothing is read from an
 * {@code hbase-site.xml}, so the caller's settings are the whole truth. HFiles that span a region
 * boundary are split by the tool (a copy); files on the same filesystem as {@code hbase.rootdir}
 * are moved, not copied.
 */
public final class BulkLoad {
  private BulkLoad() {}

  /** Loads every HFile under {@code dir}; returns the number of HFiles (after splits) loaded. */
  public static int load(String tableName, String dir, Map<String, String> settings)
      throws IOException {
    Configuration conf = HBaseConfiguration.create();
    for (Map.Entry<String, String> e : settings.entrySet()) {
      conf.set(e.getKey(), e.getValue());
    }
    return BulkLoadHFiles.create(conf).bulkLoad(TableName.valueOf(tableName), new Path(dir)).size();
  }
}
