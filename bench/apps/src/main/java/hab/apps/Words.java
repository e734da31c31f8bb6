package hab.apps;

import java.util.SplittableRandom;

/**
 * Generated English-like text for the Lucene applications: a vocabulary of syllable-built words
 * drawn with a Zipf-like skew (a few words common, most rare, as in real text). Deterministic in
 * its seed on every JVM.
 */
final class Words {
    private static final String[] SYLLABLES = {
        "al", "be", "con", "de", "en", "for", "ga", "hin", "is", "jo", "ka", "lo", "men", "no",
        "or", "pra", "qui", "re", "sto", "tan", "ul", "ver", "wi", "xe", "yo", "zer", "ing", "tion",
    };

    /** The vocabulary: word i of VOCABULARY, the smaller i the more often drawn. */
    static final String[] VOCABULARY = vocabulary(20_000);

    private Words() {}

    private static String[] vocabulary(int size) {
        SplittableRandom random = new SplittableRandom(20_261_128);
        String[] words = new String[size];
        java.util.Set<String> seen = new java.util.HashSet<>();
        for (int i = 0; i < size; ) {
            StringBuilder word = new StringBuilder();
            // Common words short: the first twenty of one syllable (28 exist), then longer.
            int syllables = 1 + random.nextInt(1 + Math.min(3, i / 20));
            for (int s = 0; s < syllables; s++) {
                word.append(SYLLABLES[random.nextInt(SYLLABLES.length)]);
            }
            if (seen.add(word.toString())) {
                words[i++] = word.toString();
            }
        }
        return words;
    }

    /** A word drawn with the skew: the index of a uniform draw squared over the vocabulary. */
    static String word(SplittableRandom random) {
        double u = random.nextDouble();
        return VOCABULARY[(int) (u * u * u * VOCABULARY.length)];
    }

    /** A sentence-like run of {@code count} words. */
    static String text(SplittableRandom random, int count) {
        StringBuilder text = new StringBuilder(count * 7);
        for (int i = 0; i < count; i++) {
            text.append(i == 0 ? "" : (random.nextInt(12) == 0 ? ". " : " ")).append(word(random));
        }
        return text.toString();
    }
}
