package hab.apps;

import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.SplittableRandom;

/**
 * DaCapo's h2 on the H2 database: each unit creates its own in-memory database, loads a
 * TPC-C-like warehouse (districts, customers, items, stock), and runs a fixed mix of the five
 * TPC-C transactions (new order 45 %, payment 43 %, order status, delivery and stock level 4 %
 * each) through prepared statements, checksumming every result it reads.
 */
final class H2Oltp implements Workload {
    static final int DISTRICTS = 10;
    static final int CUSTOMERS_PER_DISTRICT = 120;
    static final int ITEMS = 2_000;
    static final int TRANSACTIONS_PER_UNIT = 600;

    @Override
    public String name() {
        return "h2";
    }

    @Override
    public int defaultUnits() {
        return 8;
    }

    @Override
    public void setUp(Path scratch) throws Exception {
        Class.forName("org.h2.Driver");
    }

    @Override
    public long unit(int index, Path scratch) throws Exception {
        String url = "jdbc:h2:mem:unit" + index + "-" + Thread.currentThread().getId();
        try (Connection c = DriverManager.getConnection(url, "sa", "")) {
            SplittableRandom random = new SplittableRandom(90_000 + index);
            load(c, random);
            c.setAutoCommit(false);
            Transactions t = new Transactions(c);
            long sum = 0;
            for (int i = 0; i < TRANSACTIONS_PER_UNIT; i++) {
                int pick = random.nextInt(100);
                long value = pick < 45 ? t.newOrder(random)
                        : pick < 88 ? t.payment(random)
                        : pick < 92 ? t.orderStatus(random)
                        : pick < 96 ? t.delivery(random)
                        : t.stockLevel(random);
                c.commit();
                sum = Checksums.mix(sum, value);
            }
            try (Statement s = c.createStatement()) {
                s.execute("SHUTDOWN");
            }
            return sum;
        }
    }

    private static void load(Connection c, SplittableRandom random) throws Exception {
        try (Statement s = c.createStatement()) {
            s.execute("CREATE TABLE district(d_id INT PRIMARY KEY, d_ytd BIGINT, d_next_o_id INT)");
            s.execute("CREATE TABLE customer(c_d_id INT, c_id INT, c_last VARCHAR(32), c_balance BIGINT,"
                    + " c_payment_cnt INT, PRIMARY KEY(c_d_id, c_id))");
            s.execute("CREATE INDEX customer_last ON customer(c_d_id, c_last)");
            s.execute("CREATE TABLE item(i_id INT PRIMARY KEY, i_name VARCHAR(32), i_price BIGINT)");
            s.execute("CREATE TABLE stock(s_i_id INT PRIMARY KEY, s_quantity INT, s_ytd BIGINT, s_order_cnt INT)");
            s.execute("CREATE TABLE orders(o_d_id INT, o_id INT, o_c_id INT, o_carrier INT, o_lines INT,"
                    + " PRIMARY KEY(o_d_id, o_id))");
            s.execute("CREATE TABLE order_line(ol_d_id INT, ol_o_id INT, ol_number INT, ol_i_id INT,"
                    + " ol_quantity INT, ol_amount BIGINT, ol_delivered BOOLEAN,"
                    + " PRIMARY KEY(ol_d_id, ol_o_id, ol_number))");
            s.execute("CREATE TABLE history(h_c_d_id INT, h_c_id INT, h_amount BIGINT, h_data VARCHAR(64))");
        }
        try (PreparedStatement d = c.prepareStatement("INSERT INTO district VALUES(?, 0, 1)");
             PreparedStatement cu = c.prepareStatement("INSERT INTO customer VALUES(?, ?, ?, 0, 0)")) {
            for (int di = 1; di <= DISTRICTS; di++) {
                d.setInt(1, di);
                d.executeUpdate();
                for (int ci = 1; ci <= CUSTOMERS_PER_DISTRICT; ci++) {
                    cu.setInt(1, di);
                    cu.setInt(2, ci);
                    cu.setString(3, lastName(ci % 100));
                    cu.executeUpdate();
                }
            }
        }
        try (PreparedStatement it = c.prepareStatement("INSERT INTO item VALUES(?, ?, ?)");
             PreparedStatement st = c.prepareStatement("INSERT INTO stock VALUES(?, ?, 0, 0)")) {
            for (int i = 1; i <= ITEMS; i++) {
                it.setInt(1, i);
                it.setString(2, Words.word(random) + "-" + i);
                it.setLong(3, 100 + random.nextInt(9_900));
                it.executeUpdate();
                st.setInt(1, i);
                st.setInt(2, 10 + random.nextInt(91));
                st.executeUpdate();
            }
        }
    }

    private static String lastName(int n) {
        String[] parts = {"BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"};
        return parts[n / 10] + parts[n % 10];
    }

    /** The five transactions, each returning a checksum of what it read. */
    private static final class Transactions {
        final Connection c;
        final PreparedStatement nextOrderId;
        final PreparedStatement bumpOrderId;
        final PreparedStatement itemPrice;
        final PreparedStatement stockRead;
        final PreparedStatement stockWrite;
        final PreparedStatement insertOrder;
        final PreparedStatement insertLine;
        final PreparedStatement customerByLast;
        final PreparedStatement pay;
        final PreparedStatement districtYtd;
        final PreparedStatement history;
        final PreparedStatement lastOrder;
        final PreparedStatement lines;
        final PreparedStatement oldestUndelivered;
        final PreparedStatement deliver;
        final PreparedStatement deliverLines;
        final PreparedStatement lowStock;

        Transactions(Connection c) throws Exception {
            this.c = c;
            nextOrderId = c.prepareStatement("SELECT d_next_o_id FROM district WHERE d_id = ?");
            bumpOrderId = c.prepareStatement("UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_id = ?");
            itemPrice = c.prepareStatement("SELECT i_price, i_name FROM item WHERE i_id = ?");
            stockRead = c.prepareStatement("SELECT s_quantity FROM stock WHERE s_i_id = ?");
            stockWrite = c.prepareStatement("UPDATE stock SET s_quantity = ?, s_ytd = s_ytd + ?,"
                    + " s_order_cnt = s_order_cnt + 1 WHERE s_i_id = ?");
            insertOrder = c.prepareStatement("INSERT INTO orders VALUES(?, ?, ?, NULL, ?)");
            insertLine = c.prepareStatement("INSERT INTO order_line VALUES(?, ?, ?, ?, ?, ?, FALSE)");
            customerByLast = c.prepareStatement("SELECT c_id, c_balance FROM customer WHERE c_d_id = ?"
                    + " AND c_last = ? ORDER BY c_id");
            pay = c.prepareStatement("UPDATE customer SET c_balance = c_balance - ?,"
                    + " c_payment_cnt = c_payment_cnt + 1 WHERE c_d_id = ? AND c_id = ?");
            districtYtd = c.prepareStatement("UPDATE district SET d_ytd = d_ytd + ? WHERE d_id = ?");
            history = c.prepareStatement("INSERT INTO history VALUES(?, ?, ?, ?)");
            lastOrder = c.prepareStatement("SELECT o_id, o_carrier FROM orders WHERE o_d_id = ? AND o_c_id = ?"
                    + " ORDER BY o_id DESC LIMIT 1");
            lines = c.prepareStatement("SELECT ol_i_id, ol_quantity, ol_amount FROM order_line"
                    + " WHERE ol_d_id = ? AND ol_o_id = ? ORDER BY ol_number");
            oldestUndelivered = c.prepareStatement("SELECT MIN(o_id) FROM orders WHERE o_d_id = ? AND o_carrier IS NULL");
            deliver = c.prepareStatement("UPDATE orders SET o_carrier = ? WHERE o_d_id = ? AND o_id = ?");
            deliverLines = c.prepareStatement("UPDATE order_line SET ol_delivered = TRUE WHERE ol_d_id = ? AND ol_o_id = ?");
            lowStock = c.prepareStatement("SELECT COUNT(DISTINCT s_i_id) FROM order_line JOIN stock ON s_i_id = ol_i_id"
                    + " WHERE ol_d_id = ? AND ol_o_id >= ? AND s_quantity < ?");
        }

        long newOrder(SplittableRandom random) throws Exception {
            int d = 1 + random.nextInt(DISTRICTS);
            int customer = 1 + random.nextInt(CUSTOMERS_PER_DISTRICT);
            int orderId = single(nextOrderId, d);
            bumpOrderId.setInt(1, d);
            bumpOrderId.executeUpdate();
            int count = 5 + random.nextInt(11);
            long sum = orderId;
            for (int n = 1; n <= count; n++) {
                int item = 1 + random.nextInt(ITEMS);
                int quantity = 1 + random.nextInt(10);
                itemPrice.setInt(1, item);
                long price;
                try (ResultSet r = itemPrice.executeQuery()) {
                    r.next();
                    price = r.getLong(1);
                    sum = Checksums.mix(sum, r.getString(2));
                }
                int stock = single(stockRead, item);
                int left = stock - quantity >= 10 ? stock - quantity : stock - quantity + 91;
                stockWrite.setInt(1, left);
                stockWrite.setInt(2, quantity);
                stockWrite.setInt(3, item);
                stockWrite.executeUpdate();
                insertLine.setInt(1, d);
                insertLine.setInt(2, orderId);
                insertLine.setInt(3, n);
                insertLine.setInt(4, item);
                insertLine.setInt(5, quantity);
                insertLine.setLong(6, price * quantity);
                insertLine.executeUpdate();
                sum = Checksums.mix(sum, price * quantity + left);
            }
            insertOrder.setInt(1, d);
            insertOrder.setInt(2, orderId);
            insertOrder.setInt(3, customer);
            insertOrder.setInt(4, count);
            insertOrder.executeUpdate();
            return sum;
        }

        long payment(SplittableRandom random) throws Exception {
            int d = 1 + random.nextInt(DISTRICTS);
            long amount = 100 + random.nextInt(500_000);
            customerByLast.setInt(1, d);
            customerByLast.setString(2, lastName(random.nextInt(100)));
            int customer = 0;
            long sum = amount;
            try (ResultSet r = customerByLast.executeQuery()) {
                int rows = 0;
                while (r.next()) {
                    rows++;
                    if (customer == 0 || rows % 2 == 0) {
                        customer = r.getInt(1);
                    }
                    sum = Checksums.mix(sum, r.getLong(2));
                }
            }
            if (customer == 0) {
                customer = 1 + random.nextInt(CUSTOMERS_PER_DISTRICT);
            }
            pay.setLong(1, amount);
            pay.setInt(2, d);
            pay.setInt(3, customer);
            pay.executeUpdate();
            districtYtd.setLong(1, amount);
            districtYtd.setInt(2, d);
            districtYtd.executeUpdate();
            history.setInt(1, d);
            history.setInt(2, customer);
            history.setLong(3, amount);
            history.setString(4, Words.text(random, 5));
            history.executeUpdate();
            return sum;
        }

        long orderStatus(SplittableRandom random) throws Exception {
            int d = 1 + random.nextInt(DISTRICTS);
            lastOrder.setInt(1, d);
            lastOrder.setInt(2, 1 + random.nextInt(CUSTOMERS_PER_DISTRICT));
            int order;
            long sum;
            try (ResultSet r = lastOrder.executeQuery()) {
                if (!r.next()) {
                    return -1;
                }
                order = r.getInt(1);
                sum = order * 31L + r.getInt(2);
            }
            lines.setInt(1, d);
            lines.setInt(2, order);
            try (ResultSet r = lines.executeQuery()) {
                while (r.next()) {
                    sum = Checksums.mix(sum, r.getInt(1) * 1_000L + r.getInt(2) + r.getLong(3));
                }
            }
            return sum;
        }

        long delivery(SplittableRandom random) throws Exception {
            int carrier = 1 + random.nextInt(10);
            long sum = carrier;
            for (int d = 1; d <= DISTRICTS; d++) {
                oldestUndelivered.setInt(1, d);
                int order;
                try (ResultSet r = oldestUndelivered.executeQuery()) {
                    r.next();
                    order = r.getInt(1);
                    if (r.wasNull()) {
                        continue;
                    }
                }
                deliver.setInt(1, carrier);
                deliver.setInt(2, d);
                deliver.setInt(3, order);
                deliver.executeUpdate();
                deliverLines.setInt(1, d);
                deliverLines.setInt(2, order);
                sum = Checksums.mix(sum, order * 16L + deliverLines.executeUpdate());
            }
            return sum;
        }

        long stockLevel(SplittableRandom random) throws Exception {
            int d = 1 + random.nextInt(DISTRICTS);
            int next = single(nextOrderId, d);
            lowStock.setInt(1, d);
            lowStock.setInt(2, next - 20);
            lowStock.setInt(3, 10 + random.nextInt(11));
            try (ResultSet r = lowStock.executeQuery()) {
                r.next();
                return r.getLong(1);
            }
        }

        private static int single(PreparedStatement query, int key) throws Exception {
            query.setInt(1, key);
            try (ResultSet r = query.executeQuery()) {
                r.next();
                return r.getInt(1);
            }
        }
    }
}
