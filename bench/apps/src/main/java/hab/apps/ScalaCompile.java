package hab.apps;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import scala.jdk.javaapi.CollectionConverters;
import scala.tools.nsc.Global;
import scala.tools.nsc.Settings;
import scala.tools.nsc.reporters.ConsoleReporter;

/**
 * The Scala 2.13 compiler: each unit compiles a generated source tree with its thread's compiler
 * instance ({@code Global}), writing class files to the thread's folder, and checksums them.
 */
final class ScalaCompile implements Workload {
    static final int FILES = 4;
    static final int FUNCTIONS_PER_FILE = 5;

    private final List<String> sources = new ArrayList<>();
    private String standardLibrary;

    @Override
    public String name() {
        return "scalac";
    }

    @Override
    public int defaultUnits() {
        return 4;
    }

    @Override
    public void setUp(Path scratch) throws Exception {
        Path folder = Files.createDirectories(scratch.resolve("scala-sources"));
        for (Path p : SourceTree.scala(folder, FILES, FUNCTIONS_PER_FILE)) {
            sources.add(p.toString());
        }
        standardLibrary = Path.of(scala.Predef.class.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    }

    /**
     * Each thread's compiler: built once, as a build server keeps it, then one {@code Run} per
     * unit (a new compile of the same tree; nothing is kept between runs but the classpath).
     */
    private final ThreadLocal<Global> compilers = new ThreadLocal<>();

    @Override
    public long unit(int index, Path scratch) throws Exception {
        Path out = scratch.resolve("scala-out");
        Global global = compilers.get();
        if (global == null) {
            Files.createDirectories(out);
            Settings settings = new Settings();
            settings.processArgumentString("-nowarn -classpath " + standardLibrary + " -d " + out);
            global = new Global(settings, new ConsoleReporter(settings));
            compilers.set(global);
        }
        global.reporter().reset();
        Global.Run run = global.new Run();
        run.compile(CollectionConverters.asScala(sources).toList());
        if (global.reporter().hasErrors()) {
            throw new IllegalStateException("scalac reported errors (printed above)");
        }
        long sum = SourceTree.checksum(out);
        SourceTree.delete(out);
        Files.createDirectories(out);
        return sum;
    }
}
