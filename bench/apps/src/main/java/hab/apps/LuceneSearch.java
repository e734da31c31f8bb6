package hab.apps;

import java.nio.file.Path;
import java.util.SplittableRandom;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.document.IntPoint;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.queryparser.classic.QueryParser;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.Sort;
import org.apache.lucene.search.SortField;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.store.ByteBuffersDirectory;
import org.apache.lucene.store.Directory;

/**
 * DaCapo's lusearch on Lucene 9: one index of generated documents built before the clock starts
 * and shared by every thread; each unit parses and runs its own queries (words, phrases, boolean
 * mixes, ranges, a sort by year), reads the top hits' stored fields, and checksums hits, documents
 * and scores.
 */
final class LuceneSearch implements Workload {
    static final int DOCUMENTS = 12_000;
    static final int QUERIES_PER_UNIT = 120;

    private Directory directory;
    private DirectoryReader reader;
    private IndexSearcher searcher;

    @Override
    public String name() {
        return "lusearch";
    }

    @Override
    public int defaultUnits() {
        return 16;
    }

    @Override
    public void setUp(Path scratch) throws Exception {
        directory = new ByteBuffersDirectory();
        try (Analyzer analyzer = new EnglishAnalyzer()) {
            LuceneIndex.index(directory, analyzer, 7, DOCUMENTS, true);
        }
        reader = DirectoryReader.open(directory);
        searcher = new IndexSearcher(reader);
    }

    @Override
    public long unit(int index, Path scratch) throws Exception {
        SplittableRandom random = new SplittableRandom(50_000 + index);
        long sum = index;
        try (Analyzer analyzer = new EnglishAnalyzer()) {
            QueryParser parser = new QueryParser("body", analyzer);
            for (int q = 0; q < QUERIES_PER_UNIT; q++) {
                Query query = query(parser, random, q);
                TopDocs top = q % 5 == 4
                        ? searcher.search(query, 20, new Sort(new SortField("year", SortField.Type.INT, true)))
                        : searcher.search(query, 20);
                sum = Checksums.mix(sum, top.totalHits.value);
                for (ScoreDoc hit : top.scoreDocs) {
                    sum = Checksums.mix(sum, hit.doc);
                    sum = Checksums.mix(sum, Float.floatToIntBits(hit.score));
                    sum = Checksums.mix(sum, searcher.storedFields().document(hit.doc).get("title"));
                }
            }
        }
        return sum;
    }

    private static Query query(QueryParser parser, SplittableRandom random, int q) throws Exception {
        switch (q % 4) {
            case 0:
                return parser.parse(Words.word(random) + " " + Words.word(random));
            case 1:
                return parser.parse("\"" + Words.word(random) + " " + Words.word(random) + "\"~3");
            case 2:
                return parser.parse("+" + Words.word(random) + " -" + Words.word(random)
                        + " title:" + Words.word(random));
            default:
                int from = 1990 + random.nextInt(30);
                return new BooleanQuery.Builder()
                        .add(parser.parse(Words.word(random)), BooleanClause.Occur.MUST)
                        .add(IntPoint.newRangeQuery("year", from, from + 5), BooleanClause.Occur.FILTER)
                        .build();
        }
    }
}
