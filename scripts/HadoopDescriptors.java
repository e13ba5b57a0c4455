// Writes the protobuf descriptors of Hadoop's RPC and HDFS client protocols, as the stack's own
// Hadoop jars carry them, into one FileDescriptorSet (docs/RUNTIME.md, "HDFS from Python").
//
//   java -cp '.debl/lib/stack/*' scripts/HadoopDescriptors.java OUT CLASS...
//
// Hadoop's jars ship no .proto files, but every class protoc generated from one holds the file's
// compiled descriptor (getDescriptor()): each CLASS named (e.g.
// org.apache.hadoop.ipc.protobuf.RpcHeaderProtos) is written with every file it imports, imports
// first, as the repeated field 1 of a FileDescriptorSet. Reflection only, so that this compiles
// with the JDK alone whatever package Hadoop shades protobuf into. Run by scripts/setup.sh
// (Java's source launcher: no build step); the output is Hadoop's, never committed.
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileOutputStream;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public class HadoopDescriptors {
  public static void main(String[] args) throws Exception {
    Map<String, byte[]> files = new LinkedHashMap<>();
    for (int i = 1; i < args.length; i++) {
      add(Class.forName(args[i]).getMethod("getDescriptor").invoke(null), files);
    }
    ByteArrayOutputStream set = new ByteArrayOutputStream();
    for (byte[] file : files.values()) {
      set.write(1 << 3 | 2);  // field 1, length-delimited
      for (int n = file.length; ; n >>>= 7) {
        if (n < 0x80) {
          set.write(n);
          break;
        }
        set.write((n & 0x7F) | 0x80);
      }
      set.write(file);
    }
    File out = new File(args[0]);
    File tmp = new File(args[0] + ".tmp");
    try (FileOutputStream f = new FileOutputStream(tmp)) {
      set.writeTo(f);
    }
    if (!tmp.renameTo(out)) {
      throw new IllegalStateException("could not rename " + tmp + " to " + out);
    }
    System.out.println("[setup] Hadoop's descriptors: " + String.join(" ", files.keySet()));
  }

  private static void add(Object descriptor, Map<String, byte[]> files) throws Exception {
    Class<?> type = descriptor.getClass();
    String name = (String) type.getMethod("getName").invoke(descriptor);
    if (files.containsKey(name)) {
      return;
    }
    for (Object imported : (List<?>) type.getMethod("getDependencies").invoke(descriptor)) {
      add(imported, files);
    }
    Object proto = type.getMethod("toProto").invoke(descriptor);
    files.put(name, (byte[]) proto.getClass().getMethod("toByteArray").invoke(proto));
  }
}
