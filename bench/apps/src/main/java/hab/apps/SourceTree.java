package hab.apps;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * Generated source trees for the Kotlin and Scala compilers: files in four packages, each with
 * data (case) classes, a sealed hierarchy matched exhaustively, a generic store with lambdas,
 * collection pipelines and string work, each file calling into the one before it. Written once
 * per run; the same text on every run.
 */
final class SourceTree {
    private SourceTree() {}

    /** Writes {@code files} Kotlin files under {@code folder}; their paths. */
    static List<Path> kotlin(Path folder, int files, int functionsPerFile) throws IOException {
        List<Path> paths = new ArrayList<>();
        for (int k = 0; k < files; k++) {
            StringBuilder s = new StringBuilder();
            s.append("package gen.p").append(k % 4).append("\n\n");
            if (k > 0) {
                s.append("import gen.p").append((k - 1) % 4).append(".f").append(k - 1).append("x0\n");
                s.append("import gen.p").append((k - 1) % 4).append(".Item").append(k - 1).append("\n\n");
            }
            s.append("data class Item").append(k).append("(val id: Int, val name: String, val weight: Double) {\n")
             .append("    fun scaled(factor: Double): Item").append(k).append(" = copy(weight = weight * factor)\n}\n\n")
             .append("sealed interface Shape").append(k).append("\n")
             .append("data class Circle").append(k).append("(val r: Double) : Shape").append(k).append("\n")
             .append("data class Rect").append(k).append("(val w: Double, val h: Double) : Shape").append(k).append("\n")
             .append("object Empty").append(k).append(" : Shape").append(k).append("\n\n")
             .append("fun Shape").append(k).append(".area(): Double = when (this) {\n")
             .append("    is Circle").append(k).append(" -> 3.14159 * r * r\n")
             .append("    is Rect").append(k).append(" -> w * h\n")
             .append("    Empty").append(k).append(" -> 0.0\n}\n\n")
             .append("class Store").append(k).append("<T : Comparable<T>>(private val items: MutableList<T> = mutableListOf()) {\n")
             .append("    fun add(item: T): Store").append(k).append("<T> { items.add(item); return this }\n")
             .append("    fun sorted(): List<T> = items.sorted()\n")
             .append("    fun <R> mapAll(f: (T) -> R): List<R> = items.map(f)\n}\n\n")
             .append("fun process").append(k).append("(input: List<Int>): Map<String, Int> =\n")
             .append("    input.filter { it % 3 != ").append(k % 3).append(" }.groupBy { \"g\" + (it % 7) }.mapValues { (_, v) -> v.sum() }\n\n");
            for (int j = 0; j < functionsPerFile; j++) {
                s.append("fun f").append(k).append("x").append(j).append("(x: Int, s: String): String {\n")
                 .append("    val parts = s.split(',').map { it.trim() }.filter { it.length > ").append(j % 3).append(" }\n")
                 .append("    var acc = x + ").append(j).append("\n")
                 .append("    for (p in parts) { acc = acc * 31 + p.length }\n")
                 .append("    val shapes = listOf<Shape").append(k).append(">(Circle").append(k).append("(acc.toDouble()), Rect")
                 .append(k).append("(1.0, 2.0), Empty").append(k).append(")\n")
                 .append("    val store = Store").append(k).append("<Int>().add(acc).add(").append(j).append(")\n")
                 .append("    val total = shapes.sumOf { it.area() } + store.mapAll { it * 2 }.sum()\n");
                if (k > 0) {
                    s.append("    val before = f").append(k - 1).append("x0(acc, s) + Item").append(k - 1)
                     .append("(acc, s, 1.0).scaled(2.0).name\n");
                } else {
                    s.append("    val before = s.reversed()\n");
                }
                s.append("    return when {\n")
                 .append("        acc > 100 -> \"big$acc${before.length}\"\n")
                 .append("        total < 0 -> \"neg\"\n")
                 .append("        else -> parts.joinToString(\"-\") + process").append(k).append("(listOf(acc, ").append(j).append(")).keys\n")
                 .append("    }\n}\n\n");
            }
            Path path = folder.resolve("File" + k + ".kt");
            Files.writeString(path, s);
            paths.add(path);
        }
        return paths;
    }

    /** Writes {@code files} Scala files under {@code folder}; their paths. */
    static List<Path> scala(Path folder, int files, int functionsPerFile) throws IOException {
        List<Path> paths = new ArrayList<>();
        for (int k = 0; k < files; k++) {
            StringBuilder s = new StringBuilder();
            s.append("package gen.p").append(k % 4).append("\n\n");
            if (k > 0) {
                s.append("import gen.p").append((k - 1) % 4).append(".{Item").append(k - 1).append(", Ops")
                 .append(k - 1).append("}\n\n");
            }
            s.append("final case class Item").append(k).append("(id: Int, name: String, weight: Double) {\n")
             .append("  def scaled(factor: Double): Item").append(k).append(" = copy(weight = weight * factor)\n}\n\n")
             .append("sealed trait Shape").append(k).append("\n")
             .append("final case class Circle").append(k).append("(r: Double) extends Shape").append(k).append("\n")
             .append("final case class Rect").append(k).append("(w: Double, h: Double) extends Shape").append(k).append("\n")
             .append("case object Empty").append(k).append(" extends Shape").append(k).append("\n\n")
             .append("final class Store").append(k).append("[T](items: List[T])(implicit ord: Ordering[T]) {\n")
             .append("  def add(item: T): Store").append(k).append("[T] = new Store").append(k).append("(item :: items)\n")
             .append("  def sorted: List[T] = items.sorted\n")
             .append("  def mapAll[R](f: T => R): List[R] = items.map(f)\n}\n\n")
             .append("object Ops").append(k).append(" {\n")
             .append("  def area(shape: Shape").append(k).append("): Double = shape match {\n")
             .append("    case Circle").append(k).append("(r) => 3.14159 * r * r\n")
             .append("    case Rect").append(k).append("(w, h) => w * h\n")
             .append("    case Empty").append(k).append(" => 0.0\n  }\n\n")
             .append("  def process(input: List[Int]): Map[String, Int] =\n")
             .append("    input.filter(_ % 3 != ").append(k % 3).append(").groupBy(i => \"g\" + (i % 7)).map { case (g, v) => g -> v.sum }\n\n");
            for (int j = 0; j < functionsPerFile; j++) {
                s.append("  def f").append(j).append("(x: Int, s: String): String = {\n")
                 .append("    val parts = s.split(',').map(_.trim).filter(_.length > ").append(j % 3).append(")\n")
                 .append("    var acc = x + ").append(j).append("\n")
                 .append("    for (p <- parts) acc = acc * 31 + p.length\n")
                 .append("    val shapes = List[Shape").append(k).append("](Circle").append(k).append("(acc.toDouble), Rect")
                 .append(k).append("(1.0, 2.0), Empty").append(k).append(")\n")
                 .append("    val store = new Store").append(k).append("[Int](Nil).add(acc).add(").append(j).append(")\n")
                 .append("    val total = shapes.map(area).sum + store.mapAll(_ * 2).sum\n");
                if (k > 0) {
                    s.append("    val before = Ops").append(k - 1).append(".f0(acc, s) + Item").append(k - 1)
                     .append("(acc, s, 1.0).scaled(2.0).name\n");
                } else {
                    s.append("    val before = s.reverse\n");
                }
                s.append("    if (acc > 100) s\"big$acc${before.length}\"\n")
                 .append("    else if (total < 0) \"neg\"\n")
                 .append("    else parts.mkString(\"-\") + process(List(acc, ").append(j).append(")).keys.mkString\n")
                 .append("  }\n\n");
            }
            s.append("}\n");
            Path path = folder.resolve("File" + k + ".scala");
            Files.writeString(path, s);
            paths.add(path);
        }
        return paths;
    }

    /** A checksum of every file under {@code folder}: relative paths in order, and bytes. */
    static long checksum(Path folder) throws IOException {
        Map<String, Path> files = new TreeMap<>();
        try (Stream<Path> paths = Files.walk(folder)) {
            paths.filter(Files::isRegularFile).forEach(p -> files.put(folder.relativize(p).toString(), p));
        }
        if (files.isEmpty()) {
            throw new IOException(folder + ": the compiler wrote nothing");
        }
        long sum = files.size();
        for (Map.Entry<String, Path> file : files.entrySet()) {
            sum = Checksums.mix(sum, file.getKey());
            sum = Checksums.mix(sum, Checksums.crc(Files.readAllBytes(file.getValue())));
        }
        return sum;
    }

    /** Deletes {@code folder} and what it holds. */
    static void delete(Path folder) throws IOException {
        if (!Files.exists(folder)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(folder)) {
            for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }
}
