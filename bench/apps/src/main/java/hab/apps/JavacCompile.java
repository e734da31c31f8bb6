package hab.apps;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.FileObject;
import javax.tools.ForwardingJavaFileManager;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileManager;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;

/**
 * The JDK's own compiler ({@code javax.tools}): each unit compiles every file of a sources jar
 * (Apache Commons CLI, copied beside the suite's jar by the build) in memory and checksums the
 * class files by name.
 */
final class JavacCompile implements Workload {
    private final List<JavaFileObject> sources = new ArrayList<>();
    private JavaCompiler compiler;

    /** A source file held in memory. */
    private static final class Source extends SimpleJavaFileObject {
        final String text;

        Source(String name, String text) {
            super(URI.create("mem:///" + name), Kind.SOURCE);
            this.text = text;
        }

        @Override
        public CharSequence getCharContent(boolean ignoreEncodingErrors) {
            return text;
        }
    }

    /** A class file written to memory, kept by name for the checksum. */
    private static final class Output extends SimpleJavaFileObject {
        final String className;
        final Map<String, byte[]> classes;

        Output(String className, Map<String, byte[]> classes) {
            super(URI.create("mem:///" + className.replace('.', '/') + ".class"), Kind.CLASS);
            this.className = className;
            this.classes = classes;
        }

        @Override
        public OutputStream openOutputStream() {
            return new ByteArrayOutputStream() {
                @Override
                public void close() {
                    classes.put(className, toByteArray());
                }
            };
        }
    }

    @Override
    public String name() {
        return "javac";
    }

    @Override
    public int defaultUnits() {
        return 8;
    }

    @Override
    public void setUp(Path scratch) throws Exception {
        compiler = ToolProvider.getSystemJavaCompiler();
        if (compiler == null) {
            throw new IllegalStateException("no system Java compiler: run on a JDK");
        }
        Path jar = Path.of(Main.class.getProtectionDomain().getCodeSource().getLocation().toURI())
                .resolveSibling("javac-sources.jar");
        if (!Files.exists(jar)) {
            throw new IOException(jar + ": not there (mvn -q -B package in bench/apps copies it)");
        }
        try (ZipFile zip = new ZipFile(jar.toFile())) {
            Enumeration<? extends ZipEntry> entries = zip.entries();
            while (entries.hasMoreElements()) {
                ZipEntry entry = entries.nextElement();
                String name = entry.getName();
                if (name.endsWith(".java") && !name.endsWith("module-info.java") && !name.endsWith("package-info.java")) {
                    try (InputStream in = zip.getInputStream(entry)) {
                        sources.add(new Source(name, new String(in.readAllBytes(), StandardCharsets.UTF_8)));
                    }
                }
            }
        }
    }

    @Override
    public long unit(int index, Path scratch) throws Exception {
        Map<String, byte[]> classes = new TreeMap<>();
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        try (StandardJavaFileManager standard = compiler.getStandardFileManager(diagnostics, null, StandardCharsets.UTF_8)) {
            JavaFileManager files = new ForwardingJavaFileManager<JavaFileManager>(standard) {
                @Override
                public JavaFileObject getJavaFileForOutput(Location location, String className,
                        JavaFileObject.Kind kind, FileObject sibling) {
                    synchronized (classes) {
                        return new Output(className, classes);
                    }
                }
            };
            List<String> options = List.of("-proc:none", "-nowarn", "-Xlint:none", "-g:none", "--release", "11");
            if (!compiler.getTask(null, files, diagnostics, options, null, sources).call()) {
                StringBuilder message = new StringBuilder("javac failed:");
                for (Diagnostic<? extends JavaFileObject> d : diagnostics.getDiagnostics()) {
                    if (d.getKind() == Diagnostic.Kind.ERROR) {
                        message.append('\n').append(d);
                    }
                }
                throw new IOException(message.toString());
            }
        }
        long sum = classes.size();
        for (Map.Entry<String, byte[]> c : classes.entrySet()) {
            sum = Checksums.mix(sum, c.getKey());
            sum = Checksums.mix(sum, Checksums.crc(c.getValue()));
        }
        return sum;
    }
}
