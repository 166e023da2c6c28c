def run_length_decode(encoded: str) -> str:
    out = []
    count = 0
    for ch in encoded:
        if ch.isdigit():
            count = count * 10 + int(ch)
        else:
            out.append(ch * count)
            count = 0
    return "".join(out)
