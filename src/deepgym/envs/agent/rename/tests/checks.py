# Hidden checks: each is (name, expression); evaluated with the package on sys.path.
CHECKS = [
    ("area_square", "shapes.area.area_of('square', 3) == 9"),
    ("area_circle", "abs(shapes.area.area_of('circle', 1) - 3.14159) < 1e-4"),
    ("exported", "shapes.area_of('square', 2) == 4"),
    ("report", "shapes.report.report([('square', 2), ('circle', 1)]) == '2 shapes, total area 7.14'"),
    ("main_runs", "__import__('subprocess').run([__import__('sys').executable, 'main.py'], capture_output=True, timeout=10).returncode == 0"),
]
