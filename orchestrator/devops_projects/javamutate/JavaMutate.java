// JavaMutate lists mutation candidates of Java source files and finds the lines that hide test methods; OpsBench's
// DevOps task generator (orchestrator/devops_projects/mutate.py) drives it. It parses with JavaParser
// (com.github.javaparser:javaparser-core from Maven Central, pinned by sha256 in mutate.py) and needs nothing else.
//
//   JavaMutate list FILE...                JSON array of {file, line, column, old, new, kind, func}: the 1-based line
//                                          and column (in chars, a tab one) where `old` starts, its replacement `new`
//   JavaMutate hide FILE CLASS#METHOD...   JSON array of {file, lines: [[first, last], ...]}: the whole lines
//                                          (1-based, inclusive) of each method METHOD of the class CLASS (a nested
//                                          class as Outer.Inner), its Javadoc and annotations included
//
// Candidates are made only inside method, constructor and lambda bodies (a field initialiser runs at class loading,
// where a change breaks everything at once) and never in an assert statement. Output order is fixed (file, line,
// column, kind, replacement), so a seed draws the same candidates on any machine.
import com.github.javaparser.JavaParser;
import com.github.javaparser.JavaToken;
import com.github.javaparser.ParserConfiguration;
import com.github.javaparser.Position;
import com.github.javaparser.StaticJavaParser;
import com.github.javaparser.TokenRange;
import com.github.javaparser.ast.CompilationUnit;
import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.body.BodyDeclaration;
import com.github.javaparser.ast.body.CallableDeclaration;
import com.github.javaparser.ast.body.MethodDeclaration;
import com.github.javaparser.ast.body.TypeDeclaration;
import com.github.javaparser.ast.expr.AssignExpr;
import com.github.javaparser.ast.expr.BinaryExpr;
import com.github.javaparser.ast.expr.BooleanLiteralExpr;
import com.github.javaparser.ast.expr.CharLiteralExpr;
import com.github.javaparser.ast.expr.ConditionalExpr;
import com.github.javaparser.ast.expr.EnclosedExpr;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.IntegerLiteralExpr;
import com.github.javaparser.ast.expr.LiteralExpr;
import com.github.javaparser.ast.expr.MethodCallExpr;
import com.github.javaparser.ast.expr.NameExpr;
import com.github.javaparser.ast.expr.FieldAccessExpr;
import com.github.javaparser.ast.expr.StringLiteralExpr;
import com.github.javaparser.ast.expr.TextBlockLiteralExpr;
import com.github.javaparser.ast.expr.UnaryExpr;
import com.github.javaparser.ast.stmt.AssertStmt;
import com.github.javaparser.ast.stmt.BlockStmt;
import com.github.javaparser.ast.stmt.DoStmt;
import com.github.javaparser.ast.stmt.ExpressionStmt;
import com.github.javaparser.ast.stmt.IfStmt;
import com.github.javaparser.ast.stmt.ReturnStmt;
import com.github.javaparser.ast.stmt.Statement;
import com.github.javaparser.ast.stmt.WhileStmt;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

public final class JavaMutate {

    record Candidate(String file, int line, int column, String old, String replacement, String kind, String func,
                     int offset, Position memberBegin, Position memberEnd) {}

    private static final Map<BinaryExpr.Operator, BinaryExpr.Operator> SWAP = new TreeMap<>();
    private static final Map<AssignExpr.Operator, AssignExpr.Operator> ASSIGN_SWAP = new TreeMap<>();

    static {
        SWAP.put(BinaryExpr.Operator.LESS, BinaryExpr.Operator.LESS_EQUALS);
        SWAP.put(BinaryExpr.Operator.LESS_EQUALS, BinaryExpr.Operator.LESS);
        SWAP.put(BinaryExpr.Operator.GREATER, BinaryExpr.Operator.GREATER_EQUALS);
        SWAP.put(BinaryExpr.Operator.GREATER_EQUALS, BinaryExpr.Operator.GREATER);
        SWAP.put(BinaryExpr.Operator.EQUALS, BinaryExpr.Operator.NOT_EQUALS);
        SWAP.put(BinaryExpr.Operator.NOT_EQUALS, BinaryExpr.Operator.EQUALS);
        SWAP.put(BinaryExpr.Operator.AND, BinaryExpr.Operator.OR);
        SWAP.put(BinaryExpr.Operator.OR, BinaryExpr.Operator.AND);
        SWAP.put(BinaryExpr.Operator.PLUS, BinaryExpr.Operator.MINUS);
        SWAP.put(BinaryExpr.Operator.MINUS, BinaryExpr.Operator.PLUS);
        SWAP.put(BinaryExpr.Operator.MULTIPLY, BinaryExpr.Operator.DIVIDE);
        SWAP.put(BinaryExpr.Operator.DIVIDE, BinaryExpr.Operator.MULTIPLY);
        SWAP.put(BinaryExpr.Operator.REMAINDER, BinaryExpr.Operator.DIVIDE);
        SWAP.put(BinaryExpr.Operator.LEFT_SHIFT, BinaryExpr.Operator.SIGNED_RIGHT_SHIFT);
        SWAP.put(BinaryExpr.Operator.SIGNED_RIGHT_SHIFT, BinaryExpr.Operator.LEFT_SHIFT);
        SWAP.put(BinaryExpr.Operator.UNSIGNED_RIGHT_SHIFT, BinaryExpr.Operator.LEFT_SHIFT);
        SWAP.put(BinaryExpr.Operator.BINARY_AND, BinaryExpr.Operator.BINARY_OR);
        SWAP.put(BinaryExpr.Operator.BINARY_OR, BinaryExpr.Operator.BINARY_AND);
        ASSIGN_SWAP.put(AssignExpr.Operator.PLUS, AssignExpr.Operator.MINUS);
        ASSIGN_SWAP.put(AssignExpr.Operator.MINUS, AssignExpr.Operator.PLUS);
    }

    private static boolean comparison(BinaryExpr.Operator op) {
        return switch (op) {
            case LESS, LESS_EQUALS, GREATER, GREATER_EQUALS, EQUALS, NOT_EQUALS -> true;
            default -> false;
        };
    }

    /** Operators whose operands, swapped, give another result: comparisons by order, -, / and %. */
    private static boolean ordered(BinaryExpr.Operator op) {
        return switch (op) {
            case LESS, LESS_EQUALS, GREATER, GREATER_EQUALS, MINUS, DIVIDE, REMAINDER -> true;
            default -> false;
        };
    }

    private static CompilationUnit parse(Path file) throws IOException {
        ParserConfiguration config = new ParserConfiguration()
                .setLanguageLevel(ParserConfiguration.LanguageLevel.JAVA_17)
                .setTabSize(1)
                .setAttributeComments(true);
        StaticJavaParser.setConfiguration(config);
        return StaticJavaParser.parse(Files.readString(file, StandardCharsets.UTF_8));
    }

    /** The source text of a node exactly as written (its tokens, comments inside included). */
    private static String text(Node node) {
        TokenRange range = node.getTokenRange().orElseThrow();
        StringBuilder out = new StringBuilder();
        for (JavaToken t : range) {
            out.append(t.getText());
        }
        return out.toString();
    }

    private static boolean singleLine(Node node) {
        return node.getBegin().isPresent() && node.getEnd().isPresent()
                && node.getBegin().get().line == node.getEnd().get().line;
    }

    /** The token of `op` between the two operands (skipping whitespace, comments and the left side's brackets). */
    private static Optional<JavaToken> operatorToken(Node left, Node right, String op) {
        Optional<JavaToken> t = left.getTokenRange().map(TokenRange::getEnd).flatMap(JavaToken::getNextToken);
        Position stop = right.getBegin().orElseThrow();
        while (t.isPresent()) {
            JavaToken tok = t.get();
            Optional<Position> at = tok.getRange().map(r -> r.begin);
            if (at.isEmpty() || !at.get().isBefore(stop)) {
                return Optional.empty();
            }
            if (tok.getText().equals(op)) {
                return t;
            }
            t = tok.getNextToken();
        }
        return Optional.empty();
    }

    /** Whether a `+` builds a string: a string or char literal anywhere in its chain of `+`. */
    private static boolean concatenation(Expression e) {
        if (e instanceof StringLiteralExpr || e instanceof TextBlockLiteralExpr || e instanceof CharLiteralExpr) {
            return true;
        }
        if (e instanceof EnclosedExpr enc) {
            return concatenation(enc.getInner());
        }
        if (e instanceof BinaryExpr b && b.getOperator() == BinaryExpr.Operator.PLUS) {
            return concatenation(b.getLeft()) || concatenation(b.getRight());
        }
        return false;
    }

    private static boolean insideAssert(Node node) {
        return node.findAncestor(AssertStmt.class).isPresent();
    }

    /** The enclosing method or constructor as Class.method (Outer.Inner.method for a nested class). */
    private static String function(Node node) {
        Optional<CallableDeclaration> callable = node.findAncestor(CallableDeclaration.class);
        if (callable.isEmpty()) {
            return "";
        }
        StringBuilder name = new StringBuilder(callable.get().getNameAsString());
        Optional<Node> parent = callable.get().getParentNode();
        while (parent.isPresent()) {
            if (parent.get() instanceof TypeDeclaration<?> type) {
                name.insert(0, type.getNameAsString() + ".");
            }
            parent = parent.get().getParentNode();
        }
        return name.toString();
    }

    private static final class Lister {
        final String file;
        final List<Candidate> out;

        Lister(String file, List<Candidate> out) {
            this.file = file;
            this.out = out;
        }

        void add(Position at, String old, String replacement, String kind, Node where) {
            CallableDeclaration<?> member = where.findAncestor(CallableDeclaration.class).orElseThrow();
            out.add(new Candidate(file, at.line, at.column, old, replacement, kind, function(where), -1,
                    member.getBegin().orElseThrow(), member.getEnd().orElseThrow()));
        }

        void add(Node node, String replacement, String kind) {
            add(node.getBegin().orElseThrow(), text(node), replacement, kind, node);
        }

        void intLiteral(Expression e) {
            if (e instanceof IntegerLiteralExpr lit && lit.getValue().matches("[0-9]{1,9}")) {
                int v = Integer.parseInt(lit.getValue());
                add(lit, Integer.toString(v + 1), "boundary");
                if (v > 0) {
                    add(lit, Integer.toString(v - 1), "boundary");
                }
            }
        }

        void visit(Node node) {
            if (insideAssert(node) || node.getBegin().isEmpty()) {
                return;
            }
            if (node instanceof BinaryExpr b) {
                BinaryExpr.Operator op = b.getOperator();
                BinaryExpr.Operator repl = SWAP.get(op);
                boolean stringPlus = op == BinaryExpr.Operator.PLUS && concatenation(b);
                if (repl != null && !stringPlus) {
                    operatorToken(b.getLeft(), b.getRight(), op.asString()).ifPresent(t ->
                            add(t.getRange().orElseThrow().begin, op.asString(), repl.asString(), "operator", b));
                }
                if (comparison(op)) {
                    intLiteral(b.getLeft());
                    intLiteral(b.getRight());
                }
                if (ordered(op) && singleLine(b)) {
                    String l = text(b.getLeft());
                    String r = text(b.getRight());
                    if (!l.equals(r)) {
                        String whole = text(b);
                        String middle = whole.substring(l.length(), whole.length() - r.length());
                        add(b, r + middle + l, "operands");
                    }
                }
            } else if (node instanceof AssignExpr a) {
                AssignExpr.Operator repl = ASSIGN_SWAP.get(a.getOperator());
                if (repl != null && !concatenation(a.getValue())) {
                    operatorToken(a.getTarget(), a.getValue(), a.getOperator().asString()).ifPresent(t ->
                            add(t.getRange().orElseThrow().begin, a.getOperator().asString(), repl.asString(),
                                    "operator", a));
                }
            } else if (node instanceof UnaryExpr u) {
                switch (u.getOperator()) {
                    case LOGICAL_COMPLEMENT -> add(u.getBegin().orElseThrow(), "!", "", "condition", u);
                    case POSTFIX_INCREMENT, POSTFIX_DECREMENT -> {
                        String op = u.getOperator().asString();
                        String repl = op.equals("++") ? "--" : "++";
                        operatorAfter(u.getExpression(), op).ifPresent(t ->
                                add(t.getRange().orElseThrow().begin, op, repl, "operator", u));
                    }
                    case PREFIX_INCREMENT, PREFIX_DECREMENT -> {
                        String op = u.getOperator().asString();
                        add(u.getBegin().orElseThrow(), op, op.equals("++") ? "--" : "++", "operator", u);
                    }
                    default -> { }
                }
            } else if (node instanceof IfStmt s) {
                negate(s.getCondition(), s);
                if (s.getElseStmt().isEmpty() && s.getThenStmt() instanceof BlockStmt block
                        && !block.getStatements().isEmpty()) {
                    add(block, "{\n}", "branch");
                }
            } else if (node instanceof WhileStmt s) {
                negate(s.getCondition(), s);
            } else if (node instanceof DoStmt s) {
                negate(s.getCondition(), s);
            } else if (node instanceof ConditionalExpr c) {
                negate(c.getCondition(), c);
            } else if (node instanceof ExpressionStmt s && removable(s.getExpression())) {
                boolean inBlock = s.getParentNode().map(p -> p instanceof BlockStmt).orElse(false);
                add(s, inBlock ? "" : "{}", "statement");
            } else if (node instanceof ReturnStmt r && r.getExpression().isPresent()
                    && r.getExpression().get() instanceof BooleanLiteralExpr lit) {
                add(lit, lit.getValue() ? "false" : "true", "operator");
            } else if (node instanceof MethodCallExpr call && call.getArguments().size() >= 2) {
                Expression a = call.getArgument(0);
                Expression b = call.getArgument(1);
                if (sameShape(a, b) && singleLine(call)) {
                    String ta = text(a);
                    String tb = text(b);
                    Position pa = a.getBegin().orElseThrow();
                    Position pb = b.getBegin().orElseThrow();
                    if (!ta.equals(tb) && pa.line == pb.line) {
                        // the text from a's start to b's end, as written
                        String line = text(call);
                        Position pc = call.getBegin().orElseThrow();
                        int from = pa.column - pc.column;
                        int to = pb.column - pc.column + tb.length();
                        if (from >= 0 && to <= line.length() && line.substring(from).startsWith(ta)) {
                            String span = line.substring(from, to);
                            String between = span.substring(ta.length(), span.length() - tb.length());
                            add(pa, span, tb + between + ta, "arguments", call);
                        }
                    }
                }
            }
        }

        Optional<JavaToken> operatorAfter(Node operand, String op) {
            Optional<JavaToken> t = operand.getTokenRange().map(TokenRange::getEnd).flatMap(JavaToken::getNextToken);
            while (t.isPresent() && !t.get().getText().equals(op)) {
                if (!t.get().getCategory().isWhitespaceOrComment()) {
                    return Optional.empty();
                }
                t = t.get().getNextToken();
            }
            return t;
        }

        void negate(Expression condition, Node where) {
            if (condition instanceof BooleanLiteralExpr || !singleLine(condition)) {
                return;  // `while (true)`: negated, the loop body is unreachable code, which does not compile
            }
            String t = text(condition);
            add(condition, condition instanceof EnclosedExpr || condition instanceof NameExpr
                    || condition instanceof MethodCallExpr || condition instanceof FieldAccessExpr
                    ? "!" + t : "!(" + t + ")", "condition");
        }
    }

    /** An expression statement whose removal leaves valid code: a call, ++/--, a compound assignment. */
    private static boolean removable(Expression e) {
        if (e instanceof MethodCallExpr) {
            return true;
        }
        if (e instanceof UnaryExpr u) {
            return u.getOperator() == UnaryExpr.Operator.POSTFIX_INCREMENT
                    || u.getOperator() == UnaryExpr.Operator.POSTFIX_DECREMENT
                    || u.getOperator() == UnaryExpr.Operator.PREFIX_INCREMENT
                    || u.getOperator() == UnaryExpr.Operator.PREFIX_DECREMENT;
        }
        return e instanceof AssignExpr a && a.getOperator() != AssignExpr.Operator.ASSIGN;
    }

    /** Two arguments worth swapping: both plain names, both field reads, or literals of one kind. */
    private static boolean sameShape(Expression a, Expression b) {
        if (a instanceof NameExpr && b instanceof NameExpr) {
            return true;
        }
        if (a instanceof FieldAccessExpr && b instanceof FieldAccessExpr) {
            return true;
        }
        return a instanceof LiteralExpr && a.getClass() == b.getClass();
    }

    static List<Candidate> list(List<String> files) throws IOException {
        List<Candidate> all = new ArrayList<>();
        for (String file : files) {
            String source = Files.readString(Path.of(file), StandardCharsets.UTF_8);
            CompilationUnit cu = parse(Path.of(file));
            List<Candidate> out = new ArrayList<>();
            Lister lister = new Lister(file, out);
            for (CallableDeclaration<?> callable : cu.findAll(CallableDeclaration.class)) {
                if (callable instanceof MethodDeclaration m && m.getBody().isEmpty()) {
                    continue;
                }
                // Every node of this body that no nested method or constructor owns (those are visited on their own).
                callable.walk(node -> {
                    if (node.findAncestor(CallableDeclaration.class).orElse(null) == callable) {
                        lister.visit(node);
                    }
                });
            }
            all.addAll(valid(source, out));
        }
        List<Candidate> out = all;
        out.sort(Comparator.comparing(Candidate::file).thenComparingInt(Candidate::line)
                .thenComparingInt(Candidate::column).thenComparing(Candidate::kind)
                .thenComparing(Candidate::replacement));
        List<Candidate> unique = new ArrayList<>();
        for (Candidate c : out) {
            if (unique.isEmpty() || !unique.get(unique.size() - 1).equals(c)) {
                unique.add(c);
            }
        }
        return unique;
    }

    /** The char offset of each line's start (JavaParser's line ends: CR LF, CR, LF). */
    private static List<Integer> lineStarts(String source) {
        List<Integer> starts = new ArrayList<>();
        starts.add(0);
        for (int i = 0; i < source.length(); i++) {
            char c = source.charAt(i);
            if (c == '\n' || (c == '\r' && (i + 1 >= source.length() || source.charAt(i + 1) != '\n'))) {
                starts.add(i + 1);
            }
        }
        return starts;
    }

    /** The candidates whose text is where they say and whose mutant still parses, each with its char offset: the
     * method or constructor holding the change is parsed again as a class member (the rest of the file is
     * unchanged, so the file parses when the member does). */
    private static List<Candidate> valid(String source, List<Candidate> found) {
        List<Integer> starts = lineStarts(source);
        ParserConfiguration config = new ParserConfiguration()
                .setLanguageLevel(ParserConfiguration.LanguageLevel.JAVA_17).setTabSize(1);
        List<Candidate> out = new ArrayList<>();
        for (Candidate c : found) {
            int offset = starts.get(c.line() - 1) + c.column() - 1;
            if (!source.startsWith(c.old(), offset)) {
                continue;
            }
            int from = starts.get(c.memberBegin().line - 1) + c.memberBegin().column - 1;
            int to = starts.get(c.memberEnd().line - 1) + c.memberEnd().column;
            if (from > offset || to < offset + c.old().length() || to > source.length()) {
                continue;
            }
            String member = source.substring(from, offset) + c.replacement()
                    + source.substring(offset + c.old().length(), to);
            if (new JavaParser(config).parseBodyDeclaration(member).isSuccessful()) {
                out.add(new Candidate(c.file(), c.line(), c.column(), c.old(), c.replacement(), c.kind(), c.func(),
                        offset, c.memberBegin(), c.memberEnd()));
            }
        }
        return out;
    }

    /** The nested type Outer.Inner of a compilation unit. */
    private static Optional<TypeDeclaration<?>> type(CompilationUnit cu, String path) {
        String[] names = path.split("\\.");
        List<? extends BodyDeclaration<?>> members = cu.getTypes();
        TypeDeclaration<?> found = null;
        for (String name : names) {
            found = null;
            for (BodyDeclaration<?> member : members) {
                if (member instanceof TypeDeclaration<?> t && t.getNameAsString().equals(name)) {
                    found = t;
                    break;
                }
            }
            if (found == null) {
                return Optional.empty();
            }
            members = found.getMembers();
        }
        return Optional.ofNullable(found);
    }

    static List<int[]> hide(String file, List<String> targets) throws IOException {
        CompilationUnit cu = parse(Path.of(file));
        List<int[]> lines = new ArrayList<>();
        for (String target : targets) {
            int hash = target.indexOf('#');
            if (hash < 0) {
                throw new IllegalArgumentException("a target is CLASS#METHOD, not " + target);
            }
            String cls = target.substring(0, hash);
            String method = target.substring(hash + 1);
            TypeDeclaration<?> type = type(cu, cls).orElseThrow(() ->
                    new IllegalArgumentException(file + ": no class " + cls));
            List<MethodDeclaration> found = type.getMethodsByName(method);
            if (found.isEmpty()) {
                throw new IllegalArgumentException(file + ": no method " + method + " in " + cls);
            }
            for (MethodDeclaration m : found) {
                int first = m.getBegin().orElseThrow().line;
                if (m.getComment().isPresent() && m.getComment().get().getBegin().isPresent()) {
                    first = Math.min(first, m.getComment().get().getBegin().get().line);
                }
                lines.add(new int[] {first, m.getEnd().orElseThrow().line});
            }
        }
        lines.sort(Comparator.comparingInt(a -> a[0]));
        return lines;
    }

    private static String quote(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20 || c > 0x7e) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: JavaMutate list FILE... | JavaMutate hide FILE CLASS#METHOD...");
            System.exit(2);
        }
        StringBuilder out = new StringBuilder("[");
        try {
            if (args[0].equals("list")) {
                List<Candidate> found = list(List.of(args).subList(1, args.length));
                for (int i = 0; i < found.size(); i++) {
                    Candidate c = found.get(i);
                    out.append(i == 0 ? "" : ",\n").append("{\"file\":").append(quote(c.file()))
                            .append(",\"line\":").append(c.line()).append(",\"column\":").append(c.column())
                            .append(",\"old\":").append(quote(c.old())).append(",\"new\":")
                            .append(quote(c.replacement())).append(",\"kind\":").append(quote(c.kind()))
                            .append(",\"func\":").append(quote(c.func())).append(",\"offset\":").append(c.offset())
                            .append('}');
                }
            } else if (args[0].equals("hide") && args.length >= 3) {
                List<int[]> lines = hide(args[1], List.of(args).subList(2, args.length));
                out.append("{\"file\":").append(quote(args[1])).append(",\"lines\":[");
                for (int i = 0; i < lines.size(); i++) {
                    out.append(i == 0 ? "" : ",").append('[').append(lines.get(i)[0]).append(',')
                            .append(lines.get(i)[1]).append(']');
                }
                out.append("]}");
            } else {
                System.err.println("unknown command " + args[0]);
                System.exit(2);
            }
        } catch (IOException | RuntimeException e) {
            System.err.println(e.getClass().getSimpleName() + ": " + e.getMessage());
            System.exit(1);
        }
        System.out.println(out.append("]"));
    }
}
