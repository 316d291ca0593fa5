//! The dead-letter buffer's storage: first-in first-out lanes, one per
//! priority, threaded through one slab of at most `capacity` slots.
//!
//! A queue per priority would each keep the memory it once grew to, so a
//! buffer whose emits moved through its priorities in turn would hold the
//! capacity's worth of slots once per priority. Here every lane draws its
//! slots from the one slab, and a slot freed by one lane is reused by any
//! other: the slots never number more than the capacity, whatever the mix
//! of priorities, and an emit's own memory is freed when it leaves.
//!
//! The buffer keeps its emits within the capacity; the slab takes a new
//! slot only when none is free, so it holds no more slots than the most
//! emits ever held at once. Every operation is O(1): each lane is a doubly
//! linked list of slab indices, and free slots form a list of their own.

/// No slot.
const NIL: usize = usize::MAX;

struct Slot<T> {
    item: Option<T>,
    prev: usize,
    next: usize,
}

#[derive(Clone, Copy)]
struct Lane {
    head: usize,
    tail: usize,
    len: usize,
}

const EMPTY: Lane = Lane {
    head: NIL,
    tail: NIL,
    len: 0,
};

/// Lanes `0..lanes`, for at most `capacity` items between them.
pub(super) struct Lanes<T> {
    slots: Vec<Slot<T>>,
    /// The first free slot; free slots are chained through `next`.
    free: usize,
    lanes: Vec<Lane>,
    /// How far the slab grows at most in one step.
    capacity: usize,
}

impl<T> Lanes<T> {
    pub(super) fn new(lanes: usize, capacity: usize) -> Self {
        Lanes {
            slots: Vec::new(),
            free: NIL,
            lanes: vec![EMPTY; lanes],
            capacity,
        }
    }

    /// How many lanes.
    pub(super) fn lanes(&self) -> usize {
        self.lanes.len()
    }

    /// Items in lane `lane`.
    pub(super) fn len(&self, lane: usize) -> usize {
        self.lanes[lane].len
    }

    /// Slots the slab holds, free ones included: never more than the
    /// capacity.
    #[cfg(test)]
    fn slots(&self) -> usize {
        self.slots.len()
    }

    /// A slot holding `item`: a free one, or else a new one. Up to the
    /// capacity the slab grows geometrically, as a `Vec` does, without
    /// reserving past it.
    fn take_slot(&mut self, item: T) -> usize {
        if self.free != NIL {
            let i = self.free;
            self.free = self.slots[i].next;
            self.slots[i].item = Some(item);
            return i;
        }
        let len = self.slots.len();
        if len == self.slots.capacity() && len < self.capacity {
            let grown = (len * 2).max(8).min(self.capacity);
            self.slots.reserve_exact(grown - len);
        }
        self.slots.push(Slot {
            item: Some(item),
            prev: NIL,
            next: NIL,
        });
        len
    }

    /// Appends `item` to lane `lane`.
    pub(super) fn push_back(&mut self, lane: usize, item: T) {
        let i = self.take_slot(item);
        let l = &mut self.lanes[lane];
        self.slots[i].prev = l.tail;
        self.slots[i].next = NIL;
        match l.tail {
            NIL => l.head = i,
            t => self.slots[t].next = i,
        }
        l.tail = i;
        l.len += 1;
    }

    /// Puts `item` back at the front of lane `lane`.
    pub(super) fn push_front(&mut self, lane: usize, item: T) {
        let i = self.take_slot(item);
        let l = &mut self.lanes[lane];
        self.slots[i].prev = NIL;
        self.slots[i].next = l.head;
        match l.head {
            NIL => l.tail = i,
            h => self.slots[h].prev = i,
        }
        l.head = i;
        l.len += 1;
    }

    /// Takes the oldest item of lane `lane`, freeing its slot.
    pub(super) fn pop_front(&mut self, lane: usize) -> Option<T> {
        let l = &mut self.lanes[lane];
        let i = l.head;
        if i == NIL {
            return None;
        }
        l.head = self.slots[i].next;
        match l.head {
            NIL => l.tail = NIL,
            h => self.slots[h].prev = NIL,
        }
        l.len -= 1;
        let slot = &mut self.slots[i];
        slot.next = self.free;
        slot.prev = NIL;
        self.free = i;
        slot.item.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn each_lane_is_first_in_first_out_and_a_front_push_comes_out_first() {
        let mut l = Lanes::new(3, 10);
        for i in 0..4 {
            l.push_back(i % 3, i);
        }
        l.push_front(0, 99);
        assert_eq!(l.pop_front(0), Some(99));
        assert_eq!(l.pop_front(0), Some(0));
        assert_eq!(l.pop_front(0), Some(3));
        assert_eq!(l.pop_front(0), None);
        assert_eq!((l.len(1), l.len(2)), (1, 1));
    }

    #[test]
    fn slots_move_between_lanes_and_never_outnumber_the_most_held() {
        let capacity = 100;
        let mut l = Lanes::new(8, capacity);
        let mut model: Vec<VecDeque<u32>> = vec![VecDeque::new(); 8];
        let (mut n, mut held) = (0, 0);
        // Each lane in turn fills the capacity, displacing the oldest of
        // the lowest lane that has one, as the buffer does.
        for lane in 0..8 {
            for _ in 0..capacity {
                if held == capacity {
                    let victim = (0..8).find(|&q| l.len(q) > 0).unwrap();
                    assert_eq!(l.pop_front(victim), model[victim].pop_front());
                    held -= 1;
                }
                l.push_back(lane, n);
                model[lane].push_back(n);
                (n, held) = (n + 1, held + 1);
                assert!(l.slots() <= capacity);
            }
        }
        for (lane, m) in model.iter_mut().enumerate() {
            while let Some(want) = m.pop_front() {
                assert_eq!(l.pop_front(lane), Some(want));
            }
            assert_eq!(l.pop_front(lane), None);
        }
        assert!(l.slots.capacity() <= capacity);
    }
}
