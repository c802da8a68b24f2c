//! Go's `fmt.Sprintf` for templates' `printf`. gtmpl's own printf drops the plain `0` flag
//! (`%03d` pads with spaces), so operators' templates would render differently than in
//! lcm-tui; this one follows Go's rules for the verbs templates use: `%v %d %s %q %x %X %o %b
//! %c %t %f %e %g %%`, the flags `+ - # 0` and space, width, precision and `*`.

use gtmpl_value::{FuncError, Number, Value};

#[derive(Default, Clone, Copy)]
struct Spec {
    minus: bool,
    plus: bool,
    sharp: bool,
    zero: bool,
    space: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

/// Go's bound on a width or precision (`fmt`'s `tooLarge`).
const MAX_WIDTH: usize = 1_000_000;

/// The template function: `printf FORMAT ARGS...`.
pub(super) fn printf(args: &[Value]) -> Result<Value, FuncError> {
    let Some(Value::String(format)) = args.first() else {
        return Err(FuncError::AtLeastXArgs("printf".into(), 1));
    };
    Ok(Value::String(sprintf(format, &args[1..])))
}

/// Formats like Go's `fmt.Sprintf`.
pub(super) fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut next = 0usize;
    let chars: Vec<char> = format.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '%' {
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        let mut spec = Spec::default();
        while i < chars.len() {
            match chars[i] {
                '-' => spec.minus = true,
                '+' => spec.plus = true,
                '#' => spec.sharp = true,
                '0' => spec.zero = true,
                ' ' => spec.space = true,
                _ => break,
            }
            i += 1;
        }
        let read_num = |i: &mut usize, next: &mut usize| -> Option<usize> {
            if *i < chars.len() && chars[*i] == '*' {
                *i += 1;
                let n = args.get(*next).and_then(as_i64);
                *next += 1;
                return n.map(|n| n.unsigned_abs() as usize);
            }
            let start = *i;
            while *i < chars.len() && chars[*i].is_ascii_digit() {
                *i += 1;
            }
            // Too many digits for a usize is too large as well.
            (start < *i).then(|| {
                chars[start..*i]
                    .iter()
                    .collect::<String>()
                    .parse()
                    .unwrap_or(usize::MAX)
            })
        };
        spec.width = read_num(&mut i, &mut next);
        // Go refuses widths and precisions over a million (`%!(BADWIDTH)`), which also keeps a
        // template from asking for gigabytes of padding.
        if spec.width.is_some_and(|w| w > MAX_WIDTH) {
            out.push_str("%!(BADWIDTH)");
            spec.width = None;
        }
        if i < chars.len() && chars[i] == '.' {
            i += 1;
            spec.precision = Some(read_num(&mut i, &mut next).unwrap_or(0));
            if spec.precision.is_some_and(|p| p > MAX_WIDTH) {
                out.push_str("%!(BADPREC)");
                spec.precision = None;
            }
        }
        if spec.minus {
            spec.zero = false;
        }
        let Some(&verb) = chars.get(i) else {
            out.push_str("%!(NOVERB)");
            break;
        };
        i += 1;
        if verb == '%' {
            out.push('%');
            continue;
        }
        match args.get(next) {
            None => out.push_str(&format!("%!{verb}(MISSING)")),
            Some(v) => out.push_str(&format_one(verb, spec, v)),
        }
        next += 1;
    }
    if next < args.len() {
        let extra: Vec<String> = args[next..]
            .iter()
            .map(|v| format!("{}={}", type_name(v), format_one('v', Spec::default(), v)))
            .collect();
        out.push_str(&format!("%!(EXTRA {})", extra.join(", ")));
    }
    out
}

fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::String(_) => "string",
        Value::Number(n) if n.as_i64().is_some() || n.as_u64().is_some() => "int",
        Value::Number(_) => "float64",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) | Value::Map(_) => "map[string]interface {}",
        _ => "<nil>",
    }
}

/// Pads `body` to the width, zero padding after any sign when allowed.
fn pad(spec: Spec, body: String, numeric: bool) -> String {
    let width = spec.width.unwrap_or(0);
    let len = body.chars().count();
    if len >= width {
        return body;
    }
    let fill = width - len;
    if spec.minus {
        format!("{body}{}", " ".repeat(fill))
    } else if spec.zero && numeric {
        let (sign, digits) = match body.chars().next() {
            Some(c @ ('+' | '-' | ' ')) => (c.to_string(), body[1..].to_string()),
            _ => (String::new(), body),
        };
        format!("{sign}{}{digits}", "0".repeat(fill))
    } else {
        format!("{}{body}", " ".repeat(fill))
    }
}

fn sign(spec: Spec, negative: bool) -> &'static str {
    if negative {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    }
}

fn bad(verb: char, v: &Value) -> String {
    format!("%!{verb}({}={})", type_name(v), format_one('v', Spec::default(), v))
}

fn format_one(verb: char, spec: Spec, v: &Value) -> String {
    match v {
        Value::Number(n) => format_number(verb, spec, n, v),
        Value::String(s) => format_string(verb, spec, s, v),
        Value::Bool(b) => match verb {
            't' | 'v' => pad(spec, b.to_string(), false),
            _ => bad(verb, v),
        },
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(|x| format_one(verb, spec, x)).collect();
            format!("[{}]", inner.join(" "))
        }
        Value::Object(m) | Value::Map(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", format_one(verb, spec, &m[*k])))
                .collect();
            format!("map[{}]", inner.join(" "))
        }
        Value::NoValue | Value::Nil | Value::Function(_) => match verb {
            'v' | 's' => pad(spec, "<nil>".into(), false),
            _ => format!("%!{verb}(<nil>)"),
        },
    }
}

fn format_number(verb: char, spec: Spec, n: &Number, v: &Value) -> String {
    if let Some(i) = n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from)) {
        let neg = i < 0;
        let u = i.unsigned_abs();
        let digits = |base: u32, upper: bool| -> String {
            let s = match base {
                2 => format!("{u:b}"),
                8 => format!("{u:o}"),
                16 if upper => format!("{u:X}"),
                16 => format!("{u:x}"),
                _ => u.to_string(),
            };
            // Precision means minimum digits for integers.
            match spec.precision {
                Some(0) if u == 0 => String::new(),
                Some(p) if s.len() < p => format!("{}{s}", "0".repeat(p - s.len())),
                _ => s,
            }
        };
        let int_spec = Spec {
            zero: spec.zero && spec.precision.is_none(),
            ..spec
        };
        let body = match verb {
            'd' | 'v' => format!("{}{}", sign(spec, neg), digits(10, false)),
            'b' => format!("{}{}", sign(spec, neg), digits(2, false)),
            'o' => format!(
                "{}{}{}",
                sign(spec, neg),
                if spec.sharp { "0" } else { "" },
                digits(8, false)
            ),
            'x' => format!(
                "{}{}{}",
                sign(spec, neg),
                if spec.sharp { "0x" } else { "" },
                digits(16, false)
            ),
            'X' => format!(
                "{}{}{}",
                sign(spec, neg),
                if spec.sharp { "0X" } else { "" },
                digits(16, true)
            ),
            'c' => {
                return pad(
                    spec,
                    char::from_u32(i as u32)
                        .map(String::from)
                        .unwrap_or_else(|| "\u{FFFD}".into()),
                    false,
                )
            }
            'q' => {
                let c = char::from_u32(i as u32).unwrap_or('\u{FFFD}');
                return pad(spec, format!("'{}'", c.escape_default()), false);
            }
            'U' => return pad(spec, format!("U+{u:04X}"), false),
            'e' | 'E' | 'f' | 'F' | 'g' | 'G' => return format_float(verb, spec, i as f64),
            _ => return bad(verb, v),
        };
        return pad(int_spec, body, true);
    }
    match n.as_f64() {
        Some(f) => match verb {
            'v' | 'e' | 'E' | 'f' | 'F' | 'g' | 'G' => format_float(verb, spec, f),
            _ => bad(verb, v),
        },
        None => bad(verb, v),
    }
}

fn format_float(verb: char, spec: Spec, f: f64) -> String {
    let neg = f.is_sign_negative() && f != 0.0 || (f == 0.0 && f.is_sign_negative());
    let a = f.abs();
    let body = if f.is_nan() {
        "NaN".to_string()
    } else if f.is_infinite() {
        "Inf".to_string()
    } else {
        match verb {
            'f' | 'F' => fixed(a, spec.precision.unwrap_or(6)),
            'e' | 'E' => go_exp(a, spec.precision.unwrap_or(6), verb == 'E'),
            _ => go_g(a, spec.precision, verb == 'G'),
        }
    };
    let s = if f.is_nan() {
        body
    } else {
        format!("{}{body}", sign(spec, neg))
    };
    pad(spec, s, f.is_finite())
}

/// Digits an f64's exact decimal expansion can need (it has at most 767 significant digits
/// and 1,074 after the point). Rust's formatter refuses (panics on) a precision over 65,535;
/// past this many digits every further digit is 0, so those are written as zeros.
const EXACT_DIGITS: usize = 1_100;

/// `{:.prec}` for any precision.
fn fixed(a: f64, prec: usize) -> String {
    let mut s = format!("{:.*}", prec.min(EXACT_DIGITS), a);
    s.extend(std::iter::repeat_n('0', prec.saturating_sub(EXACT_DIGITS)));
    s
}

/// `{:.prec e}` for any precision.
fn scientific(a: f64, prec: usize) -> String {
    let s = format!("{:.*e}", prec.min(EXACT_DIGITS), a);
    match s.split_once('e') {
        Some((mant, exp)) if prec > EXACT_DIGITS => format!("{mant}{}e{exp}", "0".repeat(prec - EXACT_DIGITS)),
        _ => s,
    }
}

/// `%e`: mantissa with `prec` decimals and a signed exponent of at least two digits.
fn go_exp(a: f64, prec: usize, upper: bool) -> String {
    let s = scientific(a, prec);
    let (mant, exp) = s.split_once('e').expect("rust {:e} has an exponent");
    let exp: i32 = exp.parse().unwrap_or(0);
    let e = if upper { 'E' } else { 'e' };
    format!("{mant}{e}{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
}

/// `%g`/`%v`: shortest representation (or `prec` significant digits), exponent form when the
/// exponent is < -4 or ≥ the precision (21 for the shortest form, as Go's `%v` does).
fn go_g(a: f64, prec: Option<usize>, upper: bool) -> String {
    if a == 0.0 {
        return "0".into();
    }
    let sci = match prec {
        Some(p) => scientific(a, p.max(1) - 1),
        None => format!("{a:e}"),
    };
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let eprec = match prec {
        Some(p) => p.max(1) as i32,
        None => 21,
    };
    if exp < -4 || exp >= eprec {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits.to_string()
        };
        let e = if upper { 'E' } else { 'e' };
        format!("{m}{e}{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            format!("{digits}{}", "0".repeat(int_len - digits.len()))
        } else {
            format!("{}.{}", &digits[..int_len], &digits[int_len..])
        }
    } else {
        format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
    }
}

fn format_string(verb: char, spec: Spec, s: &str, v: &Value) -> String {
    let truncated: String = match spec.precision {
        Some(p) => s.chars().take(p).collect(),
        None => s.to_string(),
    };
    match verb {
        's' | 'v' => pad(spec, truncated, false),
        'q' => pad(spec, go_quote(&truncated), false),
        'x' | 'X' => {
            let hex: String = truncated
                .bytes()
                .map(|b| {
                    if verb == 'x' {
                        format!("{b:02x}")
                    } else {
                        format!("{b:02X}")
                    }
                })
                .collect();
            pad(spec, hex, false)
        }
        _ => bad(verb, v),
    }
}

fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(i: i64) -> Value {
        Value::from(i)
    }

    /// Go's answer to a width or precision over a million; the template renders at once
    /// instead of allocating gigabytes.
    #[test]
    fn huge_widths_and_precisions_are_refused_as_go_does() {
        let started = std::time::Instant::now();
        assert_eq!(sprintf("%999999999d", &[n(1)]), "%!(BADWIDTH)1");
        assert_eq!(sprintf("%.999999999f|", &[Value::from(1.5)]), "%!(BADPREC)1.500000|");
        assert_eq!(sprintf("%*d", &[n(2_000_000_000), n(7)]), "%!(BADWIDTH)7");
        assert_eq!(sprintf("%99999999999999999999999d", &[n(3)]), "%!(BADWIDTH)3");
        assert_eq!(sprintf("%1000000d", &[n(3)]).len(), 1_000_000);
        // Past Rust's own limit of 65,535 (which panics), digits beyond an f64's exact
        // expansion are zeros, as in Go.
        let f = sprintf("%.286011f", &[Value::from(1.5)]);
        assert_eq!((f.len(), &f[..6]), (286_013, "1.5000"));
        assert!(f[2..].bytes().skip(1).all(|b| b == b'0'));
        let e = sprintf("%.70000e", &[Value::from(1.5)]);
        assert!(
            e.starts_with("1.5000") && e.ends_with("e+00") && e.len() == 70_006,
            "{}",
            &e[e.len() - 10..]
        );
        assert_eq!(sprintf("%.70000g", &[Value::from(1.5)]), "1.5");
        assert_eq!(
            sprintf("%.3f|%.2e", &[Value::from(0.1), Value::from(12345.678)]),
            "0.100|1.23e+04"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    /// Expected strings are Go's `fmt.Sprintf` output for the same format and arguments.
    #[test]
    fn integers_match_go() {
        let cases: &[(&str, i64, &str)] = &[
            ("%d", 42, "42"),
            ("%03d", 4, "004"),
            ("%5d", 42, "   42"),
            ("%-5d|", 42, "42   |"),
            ("%+d", 42, "+42"),
            ("%05d", -42, "-0042"),
            ("% d", 7, " 7"),
            ("%x", 255, "ff"),
            ("%#x", 255, "0xff"),
            ("%08X", 255, "000000FF"),
            ("%o", 8, "10"),
            ("%#o", 8, "010"),
            ("%b", 5, "101"),
            ("%.3d", 7, "007"),
            ("%6.3d", 7, "   007"),
            ("%c", 65, "A"),
            ("%q", 65, "'A'"),
            ("%U", 0x1F600, "U+1F600"),
            ("%v", -3, "-3"),
        ];
        for (f, v, want) in cases {
            assert_eq!(sprintf(f, &[n(*v)]), *want, "format {f}");
        }
    }

    #[test]
    fn strings_and_bools_match_go() {
        let s = |x: &str| Value::from(x.to_string());
        assert_eq!(sprintf("%s", &[s("hi")]), "hi");
        assert_eq!(sprintf("%5s|", &[s("hi")]), "   hi|");
        assert_eq!(sprintf("%-5s|", &[s("hi")]), "hi   |");
        assert_eq!(sprintf("%.2s", &[s("hello")]), "he");
        assert_eq!(sprintf("%q", &[s("a\"b\n")]), "\"a\\\"b\\n\"");
        assert_eq!(sprintf("%x", &[s("hi")]), "6869");
        assert_eq!(sprintf("%t %v", &[Value::Bool(true), Value::Bool(false)]), "true false");
        assert_eq!(sprintf("100%%", &[]), "100%");
    }

    #[test]
    fn floats_match_go() {
        let f = |x: f64| Value::from(x);
        assert_eq!(sprintf("%f", &[f(3.5)]), "3.500000");
        assert_eq!(sprintf("%.2f", &[f(5.24681)]), "5.25");
        // Positive values only: gtmpl_value turns a negative non-integral f64 into an integer
        // when it builds the Value (template variables here are integers, strings and bools).
        assert_eq!(sprintf("%8.2f|", &[f(5.24681)]), "    5.25|");
        assert_eq!(sprintf("%+08.2f", &[f(5.24681)]), "+0005.25");
        assert_eq!(sprintf("%e", &[f(123456.0)]), "1.234560e+05");
        assert_eq!(sprintf("%.2E", &[f(0.000123)]), "1.23E-04");
        assert_eq!(sprintf("%v", &[f(0.1)]), "0.1");
        assert_eq!(sprintf("%v", &[f(0.00001)]), "1e-05");
        assert_eq!(sprintf("%g", &[f(100000.0)]), "100000");
        assert_eq!(sprintf("%.3g", &[f(5.24681)]), "5.25");
        assert_eq!(sprintf("%.3g", &[f(1234.5)]), "1.23e+03");
    }

    #[test]
    fn argument_errors_match_go() {
        assert_eq!(sprintf("%d %d", &[n(1)]), "1 %!d(MISSING)");
        assert_eq!(sprintf("%d", &[n(1), n(2)]), "1%!(EXTRA int=2)");
        assert_eq!(sprintf("%d", &[Value::from("x".to_string())]), "%!d(string=x)");
        assert_eq!(sprintf("%*d", &[n(4), n(7)]), "   7");
        assert_eq!(sprintf("%", &[]), "%!(NOVERB)");
    }
}
