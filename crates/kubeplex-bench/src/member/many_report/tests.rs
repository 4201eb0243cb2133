//! The figures and goals of `many_members`, from made-up measurements.

use super::*;

fn reading(rss_mb: u64, heap_mb: u64) -> Reading {
    Reading {
        cpu_s: 0.0,
        rss: rss_mb << 20,
        heap: heap_mb << 20,
        ..Reading::default()
    }
}

fn size(members: usize, added_mb: u64) -> Size {
    Size {
        members,
        ready_s: 0.5,
        join_s: 10.0,
        before: reading(50, 20),
        joined: reading(50 + added_mb, 20 + added_mb),
        left: reading(55, 21),
        idle_rate: 5.0,
        steady_rate: 5.0 + members as f64 * 0.04,
        idle_pings: 0.1,
        steady_pings: 0.1 + members as f64 * 0.01,
        leave_s: 3.0,
        ..Size::default()
    }
}

#[test]
fn the_largest_m_is_judged_and_memory_by_the_fit() {
    let restart = Restart {
        members: 300,
        synced_s: 0.6,
        ready_s: 0.7,
        children_s: 20.0,
        ..Restart::default()
    };
    // 100 MB more at M = 100, 300 MB at M = 300: 1 MB per member, the goal's edge.
    let sizes = [size(100, 100), size(300, 300)];
    let (section, goals) = report(&sizes, &restart, Duration::from_secs(30), 100.0);
    assert!(goals.iter().all(|g| g.met), "{goals:#?}");
    assert!(goals[2].measured.starts_with("0.50 ("), "{:?}", goals[2]);
    let named = |name: &str| median(&section, name);
    assert!((named("RSS per additional member (least squares)") - 1024.0).abs() < 1e-6);
    assert!((named("heap after all left / before the joins, M=300") - 1.05).abs() < 1e-9);
    let (_, missed) = report(
        &[size(100, 100), size(300, 400)],
        &restart,
        Duration::from_secs(30),
        1.0,
    );
    assert!(!missed[1].met, "{:?}", missed[1]);
    // Read again once idle connections are closed: that reading is judged.
    let closed = |mut size: Size, heap_mb| {
        size.left = reading(60, 40);
        size.idle = Some(reading(55, heap_mb));
        size
    };
    let (section, idle) = report(
        &[closed(size(100, 100), 21), closed(size(300, 300), 22)],
        &restart,
        Duration::from_secs(30),
        1.0,
    );
    assert!(idle[3].met, "{:?}", idle[3]);
    assert!(
        idle[3].measured.contains("idle timeout passed"),
        "{:?}",
        idle[3]
    );
    let name = "heap after all left and the pools' idle timeout / before the joins, M=300";
    assert!((median(&section, name) - 1.10).abs() < 1e-9);
    let (_, not_yet) = report(
        &[closed(size(100, 100), 21), closed(size(300, 300), 23)],
        &restart,
        Duration::from_secs(30),
        1.0,
    );
    assert!(!not_yet[3].met, "{:?}", not_yet[3]);
    // Read again once the watches restarted: that reading is judged, and named.
    let restarted = |mut size: Size, heap_mb| {
        size.restarted = Some(reading(55, heap_mb));
        size
    };
    let later = |heap_mb| {
        report(
            &[
                restarted(closed(size(100, 100), 30), 21),
                restarted(closed(size(300, 300), 30), heap_mb),
            ],
            &restart,
            Duration::from_secs(30),
            1.0,
        )
    };
    let (section, met) = later(22);
    assert!(met[3].met, "{:?}", met[3]);
    assert!(
        met[3].measured.contains("watches restarted"),
        "{:?}",
        met[3]
    );
    let name = "heap after all left and the watches' restart / before the joins, M=300";
    assert!((median(&section, name) - 1.10).abs() < 1e-9);
    assert!(!later(23).1[3].met);
    // A start that waits for its members misses its goal.
    let slow = Restart {
        synced_s: 5.0,
        ..restart
    };
    let (_, waited) = report(&sizes, &slow, Duration::from_secs(30), 1.0);
    assert!(!waited[4].met, "{:?}", waited[4]);
}

/// kubeplex's median of the figure `name` in `section`.
fn median(section: &Section, name: &str) -> f64 {
    let figure = section.figures.iter().find(|f| f.name == name);
    figure
        .unwrap_or_else(|| panic!("no figure {name}"))
        .kubeplex
        .median
}
