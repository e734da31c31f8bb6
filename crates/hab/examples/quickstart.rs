use hab::{HeaderWordModel, Heap, HeapConfig, Mode, TlabPolicy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = HeapConfig::builder()
        .capacity("64MiB") // sizes: "64MiB", "4k", or plain bytes
        .mode(Mode::Hab) // or Mode::Tlab, Mode::CpuLab, Mode::Flip, Mode::Shared
        .middle("auto") // levels picked for the machine; or "core:1MiB", "cpu:256KiB,core:2MiB"
        .tlab(TlabPolicy::Adaptive) // HotSpot's adaptive TLAB sizing
        .build()?; // a ConfigError names the wrong field
    let heap = Heap::new(config, HeaderWordModel)?; // or your own ObjectModel
    let mut mutator = heap.attach(); // one per thread
    for _ in 0..100_000 {
        let object = mutator.alloc(32)?; // the inline fast path: a TLAB bump
                                         // SAFETY: `object` is a fresh, aligned allocation of 32 bytes, so its first word is ours.
        unsafe { HeaderWordModel::write_header(object, 32) };
    }

    let parked = mutator.park(); // at a safepoint
    let mut collection = heap.collection(); // stops the world, retires every TLAB and buffer
    let walk = collection.verify()?; // every byte walked once: objects, then fillers
    println!(
        "{} objects ({} bytes), {} filler bytes",
        walk.objects, walk.object_bytes, walk.filler_bytes
    );
    collection.reset(); // nothing survives; or set_allocation_range(above the survivors)
    collection.finish(); // resizes TLABs and buffers, resumes the mutators
    let _mutator = parked.unpark();
    Ok(())
}
