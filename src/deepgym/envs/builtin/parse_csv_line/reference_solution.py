def parse_csv_line(line: str) -> list[str]:
    fields = []
    i = 0
    while True:
        if i < len(line) and line[i] == '"':
            i += 1
            chars = []
            while True:
                if line[i] == '"':
                    if i + 1 < len(line) and line[i + 1] == '"':
                        chars.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                chars.append(line[i])
                i += 1
            fields.append("".join(chars))
        else:
            end = line.find(",", i)
            if end == -1:
                end = len(line)
            fields.append(line[i:end])
            i = end
        if i >= len(line):
            return fields
        i += 1  # skip the comma
