package debl.jobs;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.CompareOperator;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.filter.BinaryPrefixComparator;
import org.apache.hadoop.hbase.filter.ValueFilter;

/**
 * The anchor for HBase's side of the benches (docs/BENCHMARKS.md, "HBase's own client"): the
 * same {@code get_link_list} requests as {@code debl query --target hbase}, each one bounded
 * scan of the link table (the rows of one {@code (id1, link_type)}, hidden rows dropped by the
 * region server, at most {@code limit} rows), sent by HBase's own Java client from closed-loop
 * threads of one JVM, with no Thrift server in between. Not part of any load: a measuring tool
 * run by {@code scripts/hbase_anchor.py}, which writes the requests (their scan bounds, from
 * {@code debl.store.hbase_layout.scan_bounds}, so the row layout has one definition) and reads
 * the one JSON line this prints.
 *
 * <p>Arguments: ZooKeeper quorum, its port, the table, the requests file (one request a line:
 * {@code thread TAB start row in hex TAB stop row in hex}), the threads, the row limit.
 *
 * <p>Pitfall: the region locations are looked up before the clock starts, as a client that has
 * served for a while has them cached; the Thrift path's connections are opened before its run
 * too.
 */
public final class GetLinkListBench {
  private static final byte[] FAMILY = {'l'};
  private static final byte[] QUALIFIER = {'v'};
  private static final byte[] VISIBLE = {1}; // a cell value starts with its visibility byte

  private GetLinkListBench() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 6) {
      System.err.println("usage: GetLinkListBench ZK_QUORUM ZK_PORT TABLE REQUESTS_FILE THREADS"
          + " LIMIT");
      System.exit(2);
    }
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.zookeeper.quorum", args[0]);
    conf.set("hbase.zookeeper.property.clientPort", args[1]);
    TableName name = TableName.valueOf(args[2]);
    int threads = Integer.parseInt(args[4]);
    int limit = Integer.parseInt(args[5]);
    List<List<byte[][]>> work = read(args[3], threads);
    try (Connection connection = ConnectionFactory.createConnection(conf)) {
      try (RegionLocator locator = connection.getRegionLocator(name)) {
        locator.getAllRegionLocations();
      }
      long[][] latencies = new long[threads][];
      AtomicLong rows = new AtomicLong();
      Thread[] running = new Thread[threads];
      Throwable[] failed = new Throwable[1];
      long started = System.nanoTime();
      for (int t = 0; t < threads; t++) {
        final int thread = t;
        running[t] = new Thread(() -> {
          List<byte[][]> mine = work.get(thread);
          long[] took = new long[mine.size()];
          try (Table table = connection.getTable(name)) {
            for (int i = 0; i < took.length; i++) {
              long t0 = System.nanoTime();
              rows.addAndGet(scan(table, mine.get(i), limit));
              took[i] = System.nanoTime() - t0;
            }
          } catch (IOException | RuntimeException e) {
            synchronized (failed) {
              failed[0] = e;
            }
          }
          latencies[thread] = took;
        }, "anchor-" + t);
        running[t].start();
      }
      for (Thread t : running) {
        t.join();
      }
      double seconds = (System.nanoTime() - started) / 1e9;
      if (failed[0] != null) {
        throw new IOException("a request failed: " + failed[0], failed[0]);
      }
      long[] all = Arrays.stream(latencies).flatMapToLong(Arrays::stream).sorted().toArray();
      System.out.printf("{\"requests\": %d, \"threads\": %d, \"seconds\": %.3f, \"req_s\": %.1f, "
              + "\"rows\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f}%n",
          all.length, threads, seconds, all.length / seconds, rows.get(), ms(all, 0.50),
          ms(all, 0.99), all.length == 0 ? 0.0 : all[all.length - 1] / 1e6);
    }
  }

  /** The visible rows of one request's bounds, at most {@code limit}: one scan. */
  static int scan(Table table, byte[][] bounds, int limit) throws IOException {
    Scan scan = new Scan().withStartRow(bounds[0]).withStopRow(bounds[1])
        .addColumn(FAMILY, QUALIFIER).setLimit(limit).setCaching(limit)
        .setFilter(new ValueFilter(CompareOperator.EQUAL, new BinaryPrefixComparator(VISIBLE)));
    int n = 0;
    try (ResultScanner results = table.getScanner(scan)) {
      for (Result r : results) {
        n++;
      }
    }
    return n;
  }

  /** The nearest-rank percentile of sorted nanoseconds, in milliseconds. */
  static double ms(long[] sorted, double q) {
    if (sorted.length == 0) {
      return 0.0;
    }
    int rank = (int) Math.ceil(q * sorted.length);
    return sorted[Math.max(0, Math.min(sorted.length, rank) - 1)] / 1e6;
  }

  private static List<List<byte[][]>> read(String file, int threads) throws IOException {
    List<List<byte[][]>> work = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      work.add(new ArrayList<>());
    }
    HexFormat hex = HexFormat.of();
    try (BufferedReader in = Files.newBufferedReader(Paths.get(file), StandardCharsets.US_ASCII)) {
      String line;
      while ((line = in.readLine()) != null) {
        String[] f = line.split("\t");
        work.get(Integer.parseInt(f[0]) % threads).add(
            new byte[][] {hex.parseHex(f[1]), hex.parseHex(f[2])});
      }
    }
    return work;
  }
}
