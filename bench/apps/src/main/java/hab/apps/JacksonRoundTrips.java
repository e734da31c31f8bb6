package hab.apps;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Serialization with Jackson databind, as a service spends its time: each unit builds its own
 * generated orders (customers, addresses, lines, tags, attributes), writes each to JSON, reads it
 * back into objects and into a tree, edits the tree, converts it to maps and writes it again;
 * the checksum covers every byte written and the values read back.
 */
final class JacksonRoundTrips implements Workload {
    static final int ORDERS_PER_UNIT = 400;

    /** One mapper for every thread, as Jackson intends (it is thread-safe once configured). */
    private final ObjectMapper mapper = new ObjectMapper().enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS);

    /** The data model, plain public fields. */
    public static final class Order {
        public long id;
        public String status;
        public Customer customer;
        public List<Line> lines = new ArrayList<>();
        public Map<String, String> attributes = new LinkedHashMap<>();
        public double total;
    }

    public static final class Customer {
        public int id;
        public String name;
        public String email;
        public Address address;
        public List<String> tags = new ArrayList<>();
    }

    public static final class Address {
        public String street;
        public String city;
        public String postcode;
        public String country;
    }

    public static final class Line {
        public int number;
        public String sku;
        public String description;
        public int quantity;
        public long priceCents;
        public double discount;
    }

    @Override
    public String name() {
        return "jackson";
    }

    /**
     * 96 units: Jackson's iterations keep getting faster while C2 compiles its code (one of 32
     * units fell from 2.6 s to 0.7 s over the first five), so that two warm-up iterations of 96
     * cover that.
     */
    @Override
    public int defaultUnits() {
        return 96;
    }

    @Override
    public void setUp(Path scratch) {}

    @Override
    public long unit(int index, Path scratch) throws Exception {
        SplittableRandom random = new SplittableRandom(70_000 + index);
        long sum = index;
        for (int o = 0; o < ORDERS_PER_UNIT; o++) {
            Order order = order(random, index * 100_000L + o);
            byte[] json = mapper.writeValueAsBytes(order);
            Order back = mapper.readValue(json, Order.class);
            if (back.lines.size() != order.lines.size() || back.total != order.total) {
                throw new IllegalStateException("order " + order.id + " did not survive its round trip");
            }
            JsonNode tree = mapper.readTree(json);
            ObjectNode edited = ((ObjectNode) tree).put("status", "audited");
            ArrayNode lines = (ArrayNode) edited.get("lines");
            for (JsonNode line : lines) {
                ((ObjectNode) line).put("checked", true);
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> asMap = mapper.convertValue(edited, Map.class);
            byte[] again = mapper.writeValueAsBytes(asMap);
            sum = Checksums.mix(sum, Checksums.crc(json));
            sum = Checksums.mix(sum, Checksums.crc(again));
            sum = Checksums.mix(sum, Double.doubleToLongBits(back.total) ^ back.customer.tags.size());
        }
        return sum;
    }

    private static Order order(SplittableRandom random, long id) {
        Order order = new Order();
        order.id = id;
        order.status = random.nextBoolean() ? "open" : "shipped";
        Customer customer = new Customer();
        customer.id = random.nextInt(1_000_000);
        customer.name = Words.word(random) + " " + Words.word(random);
        customer.email = Words.word(random) + "@" + Words.word(random) + ".example";
        Address address = new Address();
        address.street = (1 + random.nextInt(300)) + " " + Words.word(random) + " street";
        address.city = Words.word(random);
        address.postcode = Integer.toString(10_000 + random.nextInt(90_000));
        address.country = random.nextBoolean() ? "NL" : "FR";
        customer.address = address;
        for (int t = random.nextInt(6); t > 0; t--) {
            customer.tags.add(Words.word(random));
        }
        order.customer = customer;
        int lines = 1 + random.nextInt(20);
        double total = 0;
        for (int n = 1; n <= lines; n++) {
            Line line = new Line();
            line.number = n;
            line.sku = "SKU-" + random.nextInt(100_000);
            line.description = Words.text(random, 3 + random.nextInt(10));
            line.quantity = 1 + random.nextInt(9);
            line.priceCents = 99 + random.nextInt(50_000);
            line.discount = random.nextInt(4) * 0.05;
            total += line.quantity * line.priceCents * (1 - line.discount) / 100.0;
            order.lines.add(line);
        }
        order.total = total;
        for (int a = random.nextInt(5); a > 0; a--) {
            order.attributes.put(Words.word(random), Words.text(random, 2));
        }
        return order;
    }
}
