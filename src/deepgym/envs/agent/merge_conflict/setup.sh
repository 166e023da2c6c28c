set -e
git init -q -b main
git config user.name "deepgym agent"
git config user.email "agent@example.invalid"
printf 'def greet(name):\n    return "Hello, " + name\n' > greet.py
git add greet.py
git commit -q -m "greet"
git checkout -q -b feature
printf 'def greet(name):\n    return "Hello, " + name + "!"\n' > greet.py
git commit -q -am "greet with an exclamation mark"
git checkout -q main
printf 'def greet(name):\n    return "Hi, " + name\n' > greet.py
git commit -q -am "say hi"
git merge -q feature >/dev/null 2>&1 || true
