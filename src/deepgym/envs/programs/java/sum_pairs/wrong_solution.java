import java.util.Scanner;

// Wrong: Integer.parseInt refuses values past 2^31 (and an int sum would overflow).
public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = Integer.parseInt(in.next());
        for (int i = 0; i < n; i++) {
            int a = Integer.parseInt(in.next());
            int b = Integer.parseInt(in.next());
            System.out.println(a + b);
        }
    }
}
