package hab.bench;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;
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
 * A multi-threaded compile, as SPECjvm2008's compiler benchmark: each of THREADS threads runs
 * the JDK's own compiler ({@code javax.tools}) over every {@code .java} file of a sources jar,
 * COMPILES times, in memory (class files are written to byte arrays and dropped). One untimed
 * round per thread first, so that the timed rounds run compiled code. Prints on standard error
 * {@code compiles_per_min=}, {@code elapsed_ms=}, {@code collections=} (of the timed rounds),
 * and {@code source_files=}. Arguments: sources jar, threads, compiles per thread.
 */
public final class Javac {
    private Javac() {}

    /** A source file held in memory. */
    static final class Source extends SimpleJavaFileObject {
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

    /** A class file written to memory, counted and dropped. */
    static final class Output extends SimpleJavaFileObject {
        final AtomicLong bytes;

        Output(String name, AtomicLong bytes) {
            super(URI.create("mem:///" + name.replace('.', '/') + ".class"), Kind.CLASS);
            this.bytes = bytes;
        }

        @Override
        public OutputStream openOutputStream() {
            return new ByteArrayOutputStream() {
                @Override
                public void close() {
                    bytes.addAndGet(size());
                }
            };
        }
    }

    static List<Source> readSources(String jar) throws IOException {
        List<Source> sources = new ArrayList<>();
        try (ZipFile zip = new ZipFile(jar)) {
            Enumeration<? extends ZipEntry> entries = zip.entries();
            while (entries.hasMoreElements()) {
                ZipEntry entry = entries.nextElement();
                String name = entry.getName();
                if (!name.endsWith(".java") || name.endsWith("module-info.java")
                        || name.endsWith("package-info.java")) {
                    continue;
                }
                try (InputStream in = zip.getInputStream(entry)) {
                    sources.add(new Source(name, new String(in.readAllBytes(), StandardCharsets.UTF_8)));
                }
            }
        }
        if (sources.isEmpty()) {
            throw new IOException(jar + " holds no .java file");
        }
        return sources;
    }

    /** Compiles `sources` once; the bytes of class files written. Throws on any error. */
    static long compile(JavaCompiler compiler, List<Source> sources) throws IOException {
        AtomicLong bytes = new AtomicLong();
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        try (StandardJavaFileManager standard = compiler.getStandardFileManager(diagnostics, null, StandardCharsets.UTF_8)) {
            JavaFileManager files = new ForwardingJavaFileManager<JavaFileManager>(standard) {
                @Override
                public JavaFileObject getJavaFileForOutput(Location location, String className,
                        JavaFileObject.Kind kind, FileObject sibling) {
                    return new Output(className, bytes);
                }
            };
            List<String> options = List.of("-proc:none", "-nowarn", "-Xlint:none", "-g:none");
            boolean ok = compiler.getTask(null, files, diagnostics, options, null, sources).call();
            if (!ok) {
                StringBuilder message = new StringBuilder("the compile failed:");
                for (Diagnostic<? extends JavaFileObject> d : diagnostics.getDiagnostics()) {
                    if (d.getKind() == Diagnostic.Kind.ERROR) {
                        message.append('\n').append(d);
                    }
                }
                throw new IOException(message.toString());
            }
        }
        if (bytes.get() == 0) {
            throw new IOException("the compile wrote no class file");
        }
        return bytes.get();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Javac SOURCES_JAR THREADS COMPILES_PER_THREAD");
            System.exit(2);
        }
        List<Source> sources = readSources(args[0]);
        int threads = Integer.parseInt(args[1]);
        int compiles = Integer.parseInt(args[2]);
        JavaCompiler compiler = ToolProvider.getSystemJavaCompiler();
        if (compiler == null) {
            throw new IllegalStateException("no system Java compiler: run on a JDK");
        }
        // The clock is read by the barriers' actions, which run in the last thread to arrive
        // before any is released: a main thread scheduled late (80 threads on a few CPUs)
        // cannot start the clock after the workers have begun, or stop it after they ended.
        long[] startedNanos = new long[1];
        long[] finishedNanos = new long[1];
        long[] collectionsBefore = new long[1];
        CyclicBarrier warm = new CyclicBarrier(threads + 1, () -> {
            collectionsBefore[0] = Gc.collections();
            startedNanos[0] = System.nanoTime();
        });
        CyclicBarrier done = new CyclicBarrier(threads + 1, () -> finishedNanos[0] = System.nanoTime());
        List<Throwable> failures = new ArrayList<>();
        AtomicLong classBytes = new AtomicLong();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread worker = new Thread(() -> {
                try {
                    compile(compiler, sources); // untimed
                    warm.await();
                    for (int i = 0; i < compiles; i++) {
                        classBytes.addAndGet(compile(compiler, sources));
                    }
                    done.await();
                } catch (Throwable failure) {
                    synchronized (failures) {
                        failures.add(failure);
                    }
                    warm.reset();
                    done.reset();
                }
            }, "javac-" + t);
            workers.add(worker);
            worker.start();
        }
        try {
            warm.await();
            done.await();
            double elapsedMs = (finishedNanos[0] - startedNanos[0]) / 1e6;
            long collections = Gc.collections() - collectionsBefore[0];
            System.err.printf("compiles_per_min=%.2f%n", threads * compiles * 60_000.0 / elapsedMs);
            System.err.printf("elapsed_ms=%.1f%n", elapsedMs);
            System.err.println("collections=" + collections);
            System.err.println("source_files=" + sources.size());
            System.err.println("class_bytes=" + classBytes.get() / Math.max(1, (long) threads * compiles));
        } catch (java.util.concurrent.BrokenBarrierException broken) {
            // A worker failed: reported below.
        }
        for (Thread worker : workers) {
            worker.join();
        }
        if (!failures.isEmpty()) {
            failures.get(0).printStackTrace();
            System.exit(1);
        }
    }
}
