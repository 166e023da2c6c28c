from shapes import calc_area
from shapes.report import report

if __name__ == "__main__":
    print(calc_area("square", 3))
    print(report([("square", 2), ("circle", 1)]))
