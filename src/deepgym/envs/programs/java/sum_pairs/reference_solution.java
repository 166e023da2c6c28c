import java.io.IOException;
import java.nio.charset.StandardCharsets;

public class Main {
    public static void main(String[] args) throws IOException {
        String input = new String(System.in.readAllBytes(), StandardCharsets.US_ASCII).trim();
        if (input.isEmpty()) {
            return;
        }
        String[] words = input.split("\\s+");
        int n = Integer.parseInt(words[0]);
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < n; i++) {
            long a = Long.parseLong(words[1 + 2 * i]);
            long b = Long.parseLong(words[2 + 2 * i]);
            out.append(a + b).append('\n');
        }
        System.out.print(out);
    }
}
