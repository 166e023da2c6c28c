def evaluate_expression(expression: str) -> int:
    tokens = []
    i = 0
    while i < len(expression):
        ch = expression[i]
        if ch.isspace():
            i += 1
        elif ch.isdigit():
            j = i
            while j < len(expression) and expression[j].isdigit():
                j += 1
            tokens.append(int(expression[i:j]))
            i = j
        else:
            tokens.append(ch)
            i += 1
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def divide(a: int, b: int) -> int:
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q

    def parse_expr() -> int:
        value = parse_term()
        while peek() in ("+", "-"):
            if take() == "+":
                value += parse_term()
            else:
                value -= parse_term()
        return value

    def parse_term() -> int:
        value = parse_factor()
        while peek() in ("*", "/"):
            if take() == "*":
                value *= parse_factor()
            else:
                value = divide(value, parse_factor())
        return value

    def parse_factor() -> int:
        token = take()
        if token == "-":
            return -parse_factor()
        if token == "(":
            value = parse_expr()
            take()  # ")"
            return value
        return token

    return parse_expr()
