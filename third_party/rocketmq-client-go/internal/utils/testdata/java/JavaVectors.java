import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.compression.Compressor;
import org.apache.rocketmq.common.compression.CompressorFactory;

/**
 * Writes the test vectors of this folder with the compressors of the RocketMQ
 * Java client (rocketmq-common), as a producer compresses a body of 4 KiB or more:
 * event.json at the client's default level (5), and 1 MiB of zeros (a bomb),
 * each as LZ4, ZSTD and ZLIB; event.json also at the highest level of ZSTD
 * (22, whose frames declare a 128 MiB window) and of ZLIB (9).
 *
 * Usage: java -cp "LIB/*:." JavaVectors DIR   (LIB: the RocketMQ lib folder)
 */
public class JavaVectors {
    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        byte[] event = Files.readAllBytes(dir.resolve("event.json"));
        byte[] zeros = new byte[1 << 20];
        for (CompressionType type : CompressionType.values()) {
            Compressor c = CompressorFactory.getCompressor(type);
            String ext = type.name().toLowerCase();
            Files.write(dir.resolve("event.json." + ext), c.compress(event, 5));
            int highest = type == CompressionType.ZSTD ? 22 : type == CompressionType.ZLIB ? 9 : 0;
            if (highest > 0) {
                Files.write(dir.resolve("event-level" + highest + ".json." + ext), c.compress(event, highest));
            }
            Files.write(dir.resolve("bomb-1mib." + ext), c.compress(zeros, 5));
        }
    }
}
