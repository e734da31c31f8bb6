//! A SPECjbb-like workload: each warehouse thread keeps its own live set of orders; each
//! operation creates an order (with its order lines, referring to the warehouse's stock),
//! replaces an old one (which dies), updates another and does some computation. Throughput is
//! orders per second.

use std::sync::{Arc, Barrier};
use std::thread;

use super::{Outcome, Rng};
use crate::object::Shape;
use crate::thread::{Local, VmThread};
use crate::vm::{Vm, VmError};

/// An order: its lines (a reference array) and customer; id and total.
const ORDER: Shape = Shape::new(2, 16);
/// An order line: the stock item; quantity and amount.
const LINE: Shape = Shape::new(1, 16);
/// A stock item: price and quantity in stock.
const ITEM: Shape = Shape::new(0, 16);
/// A customer: name bytes and balance.
const CUSTOMER: Shape = Shape::new(1, 8);
const STOCK_ITEMS: usize = 100;

/// What to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Warehouses {
    /// Warehouse threads.
    pub threads: usize,
    /// Orders each creates.
    pub orders_per_thread: u64,
    /// Orders each keeps alive.
    pub live_orders: usize,
}

/// Runs the warehouses, each on its own thread.
pub fn run(vm: &Arc<Vm>, spec: Warehouses) -> Result<Outcome, VmError> {
    if spec.threads == 0 || spec.live_orders == 0 {
        return Err(VmError::Setup(format!(
            "warehouses need at least 1 thread and 1 live order each, not {} and {}",
            spec.threads, spec.live_orders
        )));
    }
    let start = Arc::new(Barrier::new(spec.threads));
    let handles: Vec<_> = (0..spec.threads)
        .map(|index| {
            let (vm, start) = (vm.clone(), start.clone());
            thread::Builder::new()
                .name(format!("warehouse-{index}"))
                .stack_size(1 << 20)
                .spawn(move || {
                    let mut t = vm.attach();
                    start.wait();
                    warehouse(&mut t, index as u64, spec)
                })
                .map_err(|e| VmError::Setup(e.to_string()))
        })
        .collect::<Result<_, _>>()?;
    let mut checksum = 0u64;
    for handle in handles {
        checksum = checksum.wrapping_add(super::join(handle)?);
    }
    let orders = spec.threads as u64 * spec.orders_per_thread;
    Ok(Outcome {
        lines: vec![format!(
            "{} warehouses processed {orders} orders (checksum {checksum:#x})",
            spec.threads
        )],
        ops: orders,
        op: "orders",
    })
}

/// One warehouse: returns a checksum of its final totals.
fn warehouse(t: &mut VmThread, index: u64, spec: Warehouses) -> Result<u64, VmError> {
    let mut rng = Rng::new(index + 1);
    let stock = t.alloc_ref_array(STOCK_ITEMS)?;
    for i in 0..STOCK_ITEMS {
        t.scope(|t| -> Result<(), VmError> {
            let item = t.alloc_record(ITEM)?;
            t.write_word(item, 0, 100 + i as u64);
            t.write_word(item, 1, 1_000_000);
            t.set_ref(stock, i, Some(item));
            Ok(())
        })?;
    }
    let orders = t.alloc_ref_array(spec.live_orders)?;
    for id in 0..spec.orders_per_thread {
        t.scope(|t| -> Result<(), VmError> {
            let order = new_order(t, &mut rng, stock, id)?;
            let slot = rng.below(spec.live_orders as u64) as usize;
            t.set_ref(orders, slot, Some(order));
            let other = rng.below(spec.live_orders as u64) as usize;
            if let Some(other) = t.get_ref(orders, other) {
                let total = order_total(t, other);
                t.write_word(other, 1, total);
            }
            Ok(())
        })?;
        compute(&mut rng);
    }
    let mut checksum = 0u64;
    for slot in 0..spec.live_orders {
        t.scope(|t| {
            if let Some(order) = t.get_ref(orders, slot) {
                checksum = checksum.wrapping_add(order_total(t, order));
            }
        });
    }
    Ok(checksum)
}

/// An order of 5 to 15 lines for a new customer.
fn new_order(t: &mut VmThread, rng: &mut Rng, stock: Local, id: u64) -> Result<Local, VmError> {
    t.scope_keep(|t| {
        let line_count = 5 + rng.below(11) as usize;
        let lines = t.alloc_ref_array(line_count)?;
        for line_index in 0..line_count {
            t.scope(|t| -> Result<(), VmError> {
                let line = t.alloc_record(LINE)?;
                let item = t.get_ref(stock, rng.below(STOCK_ITEMS as u64) as usize);
                let price = item.map_or(0, |item| t.read_word(item, 0));
                let quantity = 1 + rng.below(10);
                t.set_ref(line, 0, item);
                t.write_word(line, 0, quantity);
                t.write_word(line, 1, quantity * price);
                t.set_ref(lines, line_index, Some(line));
                Ok(())
            })?;
        }
        let customer = t.alloc_record(CUSTOMER)?;
        let name = t.alloc_byte_array(16 + rng.below(32) as usize)?;
        t.set_ref(customer, 0, Some(name));
        let order = t.alloc_record(ORDER)?;
        t.set_ref(order, 0, Some(lines));
        t.set_ref(order, 1, Some(customer));
        t.write_word(order, 0, id);
        let total = order_total(t, order);
        t.write_word(order, 1, total);
        Ok(order)
    })
}

/// The sum of an order's line amounts.
fn order_total(t: &mut VmThread, order: Local) -> u64 {
    t.scope(|t| {
        let lines = t.get_ref(order, 0).expect("orders have lines");
        let mut total = 0u64;
        for index in 0..t.len(lines) {
            t.scope(|t| {
                if let Some(line) = t.get_ref(lines, index) {
                    total += t.read_word(line, 1);
                }
            });
        }
        total
    })
}

/// Business logic that does not allocate.
fn compute(rng: &mut Rng) {
    let mut x = rng.next();
    for _ in 0..200 {
        x = x.rotate_left(7) ^ x.wrapping_mul(31);
    }
    std::hint::black_box(x);
}

/// Bytes a warehouse keeps alive: its stock and its live orders.
pub fn max_live_bytes(spec: Warehouses) -> usize {
    let order =
        (ORDER.size_words() + 1 + 15 + 15 * LINE.size_words() + CUSTOMER.size_words() + 7) * 8;
    spec.threads * (spec.live_orders * order + STOCK_ITEMS * (ITEM.size_words() + 1) * 8)
}
