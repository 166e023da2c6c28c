import heapq


def topological_sort(n: int, dependencies: list[list[int]]) -> list[int]:
    after: list[list[int]] = [[] for _ in range(n)]
    waiting = [0] * n
    for a, b in dependencies:
        after[a].append(b)
        waiting[b] += 1
    ready = [task for task in range(n) if waiting[task] == 0]
    # ready is built in ascending order, which is already a heap.
    heapq.heapify(ready)  # deepgym: equivalent-mutant statement
    order = []
    while ready:
        task = heapq.heappop(ready)
        order.append(task)
        for nxt in after[task]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(ready, nxt)
    return order if len(order) == n else []
