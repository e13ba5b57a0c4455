package debl.jobs;

import java.util.Collections;
import java.util.Map;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.config.Configurator;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * A Spark plugin ({@code spark.plugins}, set by {@code debl/spark/session.py}) that silences, in the
 * driver, the warnings that are expected in DeBL's use and tell a user nothing: set when the
 * driver starts, with no call from Python.
 */
public final class QuietLogs implements SparkPlugin {
  /** Loggers whose warnings are expected, each kept to its errors. */
  static final String[] LOGGERS = {
    // a second getOrCreate in one process: dist_ch and gen_HF reuse the session by design
    "org.apache.spark.sql.SparkSession",
    // HBase's client registry and metrics defaults
    "org.apache.hadoop.hbase.client.ZKConnectionRegistry",
    "org.apache.hadoop.metrics2.impl.MetricsConfig",
    // HBase or its ZooKeeper down: a stack trace per reconnect attempt; the call fails after
    // service_timeout with a ServiceError that says so (loaders/jobs.py)
    "org.apache.hadoop.hbase.shaded.org.apache.zookeeper",
    "org.apache.hadoop.hbase.zookeeper",
    "org.apache.hadoop.hbase.client",
  };

  @Override
  public DriverPlugin driverPlugin() {
    return new DriverPlugin() {
      @Override
      public Map<String, String> init(SparkContext sc, PluginContext context) {
        quiet();
        return Collections.emptyMap();
      }
    };
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return null;
  }

  static void quiet() {
    try {
      for (String name : LOGGERS) {
        Configurator.setLevel(name, Level.ERROR);
      }
    } catch (LinkageError e) {
      // another logging backend than log4j 2: the warnings stay, no harm
    }
  }
}
