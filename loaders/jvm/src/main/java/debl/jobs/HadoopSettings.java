package debl.jobs;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;

/**
 * The driver's Hadoop configuration, shipped to Spark tasks: {@code Configuration} itself is not
 * serializable, and a task's {@code new Configuration()} would miss what DeBL set on the session
 * ({@code fs.defaultFS}, {@code dfs.replication=1} for the one-DataNode HDFS, ...).
 */
final class HadoopSettings implements Serializable {
  private static final long serialVersionUID = 1L;
  private final HashMap<String, String> settings = new HashMap<>();

  HadoopSettings(Configuration conf) {
    for (Map.Entry<String, String> e : conf) {
      settings.put(e.getKey(), e.getValue());
    }
  }

  Configuration configuration() {
    Configuration conf = new Configuration(false);
    for (Map.Entry<String, String> e : settings.entrySet()) {
      conf.set(e.getKey(), e.getValue());
    }
    return conf;
  }
}
