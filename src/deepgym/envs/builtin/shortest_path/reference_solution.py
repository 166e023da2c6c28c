import heapq


def shortest_path(n: int, edges: list[list[int]], source: int, target: int) -> int:
    adjacency: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for u, v, w in edges:
        adjacency[u].append((v, w))
    dist = [None] * n
    heap = [(0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        if dist[u] is not None:
            continue
        dist[u] = d
        if u == target:
            return d
        for v, w in adjacency[u]:
            if dist[v] is None:
                heapq.heappush(heap, (d + w, v))
    return -1
