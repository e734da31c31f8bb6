package hab.apps;

import java.nio.file.Path;
import java.util.SplittableRandom;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.IntPoint;
import org.apache.lucene.document.NumericDocValuesField;
import org.apache.lucene.document.StoredField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.MultiTerms;
import org.apache.lucene.index.SerialMergeScheduler;
import org.apache.lucene.index.Terms;
import org.apache.lucene.index.TermsEnum;
import org.apache.lucene.store.ByteBuffersDirectory;
import org.apache.lucene.store.Directory;
import org.apache.lucene.util.BytesRef;

/**
 * DaCapo's luindex on Lucene 9: each unit indexes its own generated documents (a title, a body
 * of a few hundred words, an id, a year) into an in-memory directory with the English analyzer,
 * merges to one segment, and checksums the index's terms and statistics.
 */
final class LuceneIndex implements Workload {
    static final int DOCUMENTS_PER_UNIT = 400;

    @Override
    public String name() {
        return "luindex";
    }

    @Override
    public int defaultUnits() {
        return 8;
    }

    @Override
    public void setUp(Path scratch) {}

    @Override
    public long unit(int index, Path scratch) throws Exception {
        try (Directory directory = new ByteBuffersDirectory(); Analyzer analyzer = new EnglishAnalyzer()) {
            index(directory, analyzer, 1_000 + index, DOCUMENTS_PER_UNIT, true);
            try (DirectoryReader reader = DirectoryReader.open(directory)) {
                long sum = reader.numDocs();
                for (String field : new String[] {"title", "body"}) {
                    Terms terms = MultiTerms.getTerms(reader, field);
                    sum = Checksums.mix(sum, terms.getSumTotalTermFreq());
                    sum = Checksums.mix(sum, terms.getSumDocFreq());
                    TermsEnum each = terms.iterator();
                    for (BytesRef term = each.next(); term != null; term = each.next()) {
                        // Not term.hashCode(): Lucene seeds that hash at random in every JVM.
                        sum = Checksums.mix(sum, Checksums.crc(BytesRef.deepCopyOf(term).bytes));
                        sum = Checksums.mix(sum, each.docFreq());
                    }
                }
                return sum;
            }
        }
    }

    /**
     * Indexes {@code count} documents generated from {@code seed}, one writer thread, merges
     * run in that thread: the index is the same on every run.
     */
    static void index(Directory directory, Analyzer analyzer, long seed, int count, boolean merge)
            throws Exception {
        IndexWriterConfig config = new IndexWriterConfig(analyzer)
                .setMergeScheduler(new SerialMergeScheduler())
                .setMaxBufferedDocs(200)
                .setRAMBufferSizeMB(IndexWriterConfig.DISABLE_AUTO_FLUSH);
        SplittableRandom random = new SplittableRandom(seed);
        try (IndexWriter writer = new IndexWriter(directory, config)) {
            for (int d = 0; d < count; d++) {
                Document doc = new Document();
                String id = "doc-" + seed + "-" + d;
                int year = 1990 + random.nextInt(35);
                doc.add(new StringField("id", id, Field.Store.YES));
                doc.add(new TextField("title", Words.text(random, 4 + random.nextInt(8)), Field.Store.YES));
                doc.add(new TextField("body", Words.text(random, 150 + random.nextInt(300)), Field.Store.NO));
                doc.add(new IntPoint("year", year));
                doc.add(new NumericDocValuesField("year", year));
                doc.add(new StoredField("year", year));
                writer.addDocument(doc);
            }
            if (merge) {
                writer.forceMerge(1);
            }
            writer.commit();
        }
    }
}
