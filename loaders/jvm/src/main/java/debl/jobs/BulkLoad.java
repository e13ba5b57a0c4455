package debl.jobs;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.TableNotFoundException;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.tool.BulkLoadHFiles;

/**
 * The HBase side of gen_HF, called from Python through py4j: the table's region start keys, and
 * the bulk load of a directory written by {@code HFileOutputFormat2} ({@code dir/<family>/<hfile>}).
 * (Pre-split table creation: {@link Tables}.)
 *
 * <p>Every call takes its settings as a map (ZooKeeper quorum and client port, {@code
 * fs.defaultFS}, ...) applied over HBase's defaults ({@code hbase-default.xml} from the shaded
 * jar); no {@code hbase-site.xml} is read, so the caller's settings are the whole truth. Each call
 * opens and closes its own connection: they are rare (once per run) and this keeps no state.
 */
public final class BulkLoad {
  private BulkLoad() {}

  static Configuration conf(Map<String, String> settings) {
    Configuration conf = HBaseConfiguration.create();
    for (Map.Entry<String, String> e : settings.entrySet()) {
      conf.set(e.getKey(), e.getValue());
    }
    return conf;
  }

  /**
   * Loads every HFile under {@code dir} into the existing table; returns the number of HFiles
   * loaded (after any split). HFiles that span a region boundary are split by the tool (a copy);
   * files on the filesystem of {@code hbase.rootdir} are moved, not copied, so {@code dir} is
   * left without them.
   */
  public static int load(String tableName, String dir, Map<String, String> settings)
      throws IOException {
    return BulkLoadHFiles.create(conf(settings))
        .bulkLoad(TableName.valueOf(tableName), new Path(dir))
        .size();
  }

  /**
   * The start keys of the table's regions, in order, without the first region's empty key.
   * Throws TableNotFoundException for a missing table (the locator alone returns no keys).
   */
  public static List<byte[]> splitKeys(String tableName, Map<String, String> settings)
      throws IOException {
    TableName name = TableName.valueOf(tableName);
    try (Connection conn = ConnectionFactory.createConnection(conf(settings));
        Admin admin = conn.getAdmin();
        RegionLocator locator = conn.getRegionLocator(name)) {
      if (!admin.tableExists(name)) {
        throw new TableNotFoundException(name);
      }
      List<byte[]> keys = new ArrayList<>();
      for (byte[] key : locator.getStartKeys()) {
        if (key.length > 0) {
          keys.add(key);
        }
      }
      return keys;
    }
  }
}
