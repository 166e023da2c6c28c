class MinStack:
    def __init__(self) -> None:
        # Each entry stores the value and the minimum of the stack up to it.
        self.entries: list[tuple[int, int]] = []

    def push(self, value: int) -> None:
        current_min = min(value, self.entries[-1][1]) if self.entries else value
        self.entries.append((value, current_min))

    def pop(self) -> int:
        return self.entries.pop()[0]

    def top(self) -> int:
        return self.entries[-1][0]

    def get_min(self) -> int:
        return self.entries[-1][1]
