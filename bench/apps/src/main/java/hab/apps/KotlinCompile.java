package hab.apps;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.jetbrains.kotlin.cli.common.ExitCode;
import org.jetbrains.kotlin.cli.jvm.K2JVMCompiler;

/**
 * The Kotlin compiler (K2, embeddable): each unit compiles a generated source tree to class
 * files in its thread's folder and checksums them. The compiler's environment is kept alive
 * between compiles, as the Kotlin daemon keeps it.
 */
final class KotlinCompile implements Workload {
    static final int FILES = 6;
    static final int FUNCTIONS_PER_FILE = 6;

    private Path sources;
    private String standardLibrary;

    @Override
    public String name() {
        return "kotlinc";
    }

    @Override
    public int defaultUnits() {
        return 4;
    }

    @Override
    public void setUp(Path scratch) throws Exception {
        System.setProperty("kotlin.environment.keepalive", "true");
        System.setProperty("idea.io.use.nio2", "true");
        sources = Files.createDirectories(scratch.resolve("kotlin-sources"));
        SourceTree.kotlin(sources, FILES, FUNCTIONS_PER_FILE);
        standardLibrary = Path.of(Class.forName("kotlin.Unit").getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    }

    @Override
    public long unit(int index, Path scratch) throws Exception {
        Path out = scratch.resolve("kotlin-out-" + index);
        SourceTree.delete(out);
        List<String> args = new ArrayList<>(List.of(
                sources.toString(), "-d", out.toString(), "-classpath", standardLibrary,
                "-no-stdlib", "-no-reflect", "-jvm-target", "17", "-nowarn", "-module-name", "generated"));
        ByteArrayOutputStream messages = new ByteArrayOutputStream();
        ExitCode code;
        try (PrintStream err = new PrintStream(messages, true, StandardCharsets.UTF_8)) {
            code = new K2JVMCompiler().exec(err, args.toArray(new String[0]));
        }
        if (code != ExitCode.OK) {
            throw new IllegalStateException("kotlinc failed (" + code + "):\n" + messages.toString(StandardCharsets.UTF_8));
        }
        long sum = SourceTree.checksum(out);
        SourceTree.delete(out);
        return sum;
    }
}
