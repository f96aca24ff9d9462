"""XLA-CPU's unstable sort, step for step: libstdc++'s `std::sort` (introsort).

XLA-CPU's SortThunk sorts each row with `std::sort` when `is_stable` is false (and with
`std::stable_sort` otherwise). Which of several equivalent elements lands first is then
decided by the algorithm's exact sequence of comparisons and swaps: median-of-three
quicksort partitions down to runs of 16, a heapsort fallback after 2*floor(log2 n)
levels, then one insertion sort over the whole row (libstdc++'s `__introsort_loop`,
`__final_insertion_sort`). This module replays that sequence on a row of keys, so the
interpreter returns the order XLA-CPU does, not just some sorted order.

`less(i, j)` compares the elements that started at positions i and j; the result is the
permutation `order` with row[order] sorted.
"""

from __future__ import annotations

from collections.abc import Callable

_THRESHOLD = 16  # libstdc++'s _S_threshold

Less = Callable[[int, int], bool]


def std_sort_order(n: int, less: Less) -> list[int]:
    """The permutation std::sort applies to a row of n elements under `less`."""
    a = list(range(n))
    if n > 1:
        _introsort_loop(a, 0, n, 2 * (n.bit_length() - 1), less)
        _final_insertion_sort(a, 0, n, less)
    return a


def _introsort_loop(a: list[int], first: int, last: int, depth: int, less: Less) -> None:
    while last - first > _THRESHOLD:
        if depth == 0:
            _heap_sort(a, first, last, less)
            return
        depth -= 1
        cut = _partition_pivot(a, first, last, less)
        _introsort_loop(a, cut, last, depth, less)
        last = cut


def _partition_pivot(a: list[int], first: int, last: int, less: Less) -> int:
    mid = first + (last - first) // 2
    _median_to_first(a, first, first + 1, mid, last - 1, less)
    return _unguarded_partition(a, first + 1, last, first, less)


def _median_to_first(a: list[int], result: int, x: int, y: int, z: int, less: Less) -> None:
    """Swap the median of a[x], a[y], a[z] (libstdc++'s choice among equals) to `result`."""
    if less(a[x], a[y]):
        pick = y if less(a[y], a[z]) else z if less(a[x], a[z]) else x
    else:
        pick = x if less(a[x], a[z]) else z if less(a[y], a[z]) else y
    a[result], a[pick] = a[pick], a[result]


def _unguarded_partition(a: list[int], first: int, last: int, pivot: int, less: Less) -> int:
    p = a[pivot]  # the pivot stays at `pivot` (before `first`) during the partition
    while True:
        while less(a[first], p):
            first += 1
        last -= 1
        while less(p, a[last]):
            last -= 1
        if not first < last:
            return first
        a[first], a[last] = a[last], a[first]
        first += 1


def _final_insertion_sort(a: list[int], first: int, last: int, less: Less) -> None:
    if last - first > _THRESHOLD:
        _insertion_sort(a, first, first + _THRESHOLD, less)
        for i in range(first + _THRESHOLD, last):
            _unguarded_linear_insert(a, i, less)
    else:
        _insertion_sort(a, first, last, less)


def _insertion_sort(a: list[int], first: int, last: int, less: Less) -> None:
    for i in range(first + 1, last):
        if less(a[i], a[first]):
            a[first : i + 1] = [a[i], *a[first:i]]
        else:
            _unguarded_linear_insert(a, i, less)


def _unguarded_linear_insert(a: list[int], last: int, less: Less) -> None:
    val = a[last]
    nxt = last - 1
    while less(val, a[nxt]):
        a[last] = a[nxt]
        last = nxt
        nxt -= 1
    a[last] = val


# --- the heapsort fallback (__partial_sort(first, last, last) = make_heap + sort_heap) ---


def _heap_sort(a: list[int], first: int, last: int, less: Less) -> None:
    n = last - first
    if n >= 2:
        parent = (n - 2) // 2
        while True:
            _adjust_heap(a, first, parent, n, a[first + parent], less)
            if parent == 0:
                break
            parent -= 1
    while last - first > 1:
        last -= 1
        value = a[last]
        a[last] = a[first]
        _adjust_heap(a, first, 0, last - first, value, less)


def _adjust_heap(a: list[int], first: int, hole: int, n: int, value: int, less: Less) -> None:
    top = hole
    child = hole
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if less(a[first + child], a[first + child - 1]):
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if n % 2 == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and less(a[first + parent], value):
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = value
