package hab.apps;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.zip.CRC32;

/** Checksum helpers, and the values each application gives on stock HotSpot. */
final class Checksums {
    private Checksums() {}

    /** Mixes {@code value} into {@code sum}, order-sensitive (a 64-bit FNV-style step). */
    static long mix(long sum, long value) {
        return (sum ^ value) * 0x100000001b3L + 0x9e3779b97f4a7c15L;
    }

    static long mix(long sum, String text) {
        return mix(sum, crc(text.getBytes(StandardCharsets.UTF_8)));
    }

    static long crc(byte[] bytes) {
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return crc.getValue();
    }

    /**
     * An iteration's checksum from its units': each unit's value placed by its index, then
     * summed, so that the order in which threads finish units does not matter.
     */
    static long placed(int index, long unitChecksum) {
        return mix(index * 0x9e3779b97f4a7c15L, unitChecksum);
    }

    /**
     * The checksum recorded on stock HotSpot for {@code app} at {@code units} units on this
     * JDK's feature release ({@code javac.8.jdk25}: an application whose output depends on the
     * JDK's own classes), else on any ({@code javac.8}), or null where none is recorded.
     */
    static Long expected(String app, int units) throws IOException {
        Properties recorded = new Properties();
        try (InputStream in = Checksums.class.getResourceAsStream("expected-checksums.properties")) {
            if (in == null) {
                return null;
            }
            recorded.load(in);
        }
        String key = app + "." + units;
        String value = recorded.getProperty(key + ".jdk" + Runtime.version().feature(),
                                            recorded.getProperty(key));
        return value == null ? null : Long.parseUnsignedLong(value.substring(2), 16);
    }
}
