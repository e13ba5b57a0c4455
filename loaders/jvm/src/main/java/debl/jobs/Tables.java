package debl.jobs;

import java.io.IOException;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;

/**
 * Creates a table pre-split at given row keys, from Python through py4j: the Thrift1 API that
 * happybase speaks cannot pre-split, and gen_HF wants one region per bucket so that a bucket's
 * HFiles land in one region.
 */
public final class Tables {
  private Tables() {}

  /** Creates {@code name} with one family (one version kept) split at {@code splits};
   *  returns false if the table already exists. */
  public static boolean createPresplit(String name, String family, List<byte[]> splits,
      Map<String, String> settings) throws IOException {
    Configuration conf = HBaseConfiguration.create();
    for (Map.Entry<String, String> e : settings.entrySet()) {
      conf.set(e.getKey(), e.getValue());
    }
    try (Connection conn = ConnectionFactory.createConnection(conf);
        Admin admin = conn.getAdmin()) {
      TableName table = TableName.valueOf(name);
      if (admin.tableExists(table)) {
        return false;
      }
      TableDescriptorBuilder desc = TableDescriptorBuilder.newBuilder(table)
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(family.getBytes())
              .setMaxVersions(1).build());
      if (splits.isEmpty()) {
        admin.createTable(desc.build());
      } else {
        admin.createTable(desc.build(), splits.toArray(new byte[0][]));
      }
      return true;
    }
  }
}
