//! Recognises the one statement shape `aorta sql` answers without SQLite's row loop: grouped
//! (or whole-table) aggregates over one table,
//!
//! ```sql
//! SELECT key | agg(arg) [[AS] alias], … FROM table
//!   [WHERE col op literal AND …] [GROUP BY col, …] [ORDER BY term, …] [LIMIT n [OFFSET m]]
//! ```
//!
//! with `agg` one of `COUNT(*)`, `COUNT`, `COUNT(DISTINCT col)`, `SUM`, `TOTAL`, `AVG`, `MIN`,
//! `MAX`, and `arg` an integer column, `col + col` or `col - col` (`COUNT`, `MIN` and `MAX` also
//! take a text column). Conditions compare a column with a literal of its own type (`=`, `<>`,
//! `<`, …, `IN (…)`, `NOT IN (…)`, `IS [NOT] NULL`). Anything else, or anything this parser is
//! unsure of (an alias that is also a column name, a real column, a comment in a literal), is
//! not recognised and runs on SQLite: a miss costs speed, never a different answer. SQLite has
//! prepared the statement before this runs, so syntax and name errors are SQLite's own.

use aorta_ingest::schema::{self, ColType, Column, Table};

use super::vtab::columns;

/// A column of the table, compared by name (the schema's types have no `PartialEq`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Col(pub(super) &'static Column);

impl PartialEq for Col {
    fn eq(&self, other: &Col) -> bool {
        self.0.name == other.0.name
    }
}

impl std::ops::Deref for Col {
    type Target = Column;
    fn deref(&self) -> &Column {
        self.0
    }
}

/// A statement of the recognised shape.
#[derive(Debug)]
pub(super) struct Aggregate {
    pub(super) table: &'static Table,
    pub(super) items: Vec<Item>,
    /// Conditions, all of which must hold (`AND`).
    pub(super) filter: Vec<Cond>,
    /// `GROUP BY` columns; empty for a whole-table aggregate (one result row).
    pub(super) keys: Vec<Col>,
    /// The `ORDER BY … LIMIT …` tail, with every term rewritten as a result position: SQLite
    /// applies it to the aggregated rows.
    pub(super) tail: String,
}

/// One result column.
#[derive(Debug, PartialEq)]
pub(super) enum Item {
    /// A `GROUP BY` column.
    Key(Col),
    /// An aggregate.
    Agg(Func, Arg),
}

/// The aggregate functions that are pushed down.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Func {
    CountAll,
    Count,
    CountDistinct,
    Sum,
    Total,
    Avg,
    Min,
    Max,
}

/// An aggregate's argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Arg {
    /// `COUNT(*)`.
    Star,
    Col(Col),
    Add(Col, Col),
    Sub(Col, Col),
}

/// One `WHERE` condition on a column.
#[derive(Debug, PartialEq)]
pub(super) struct Cond {
    pub(super) col: Col,
    pub(super) test: Test,
}

#[derive(Debug, PartialEq)]
pub(super) enum Test {
    Cmp(Op, Lit),
    /// `IN (…)`; `true`: `NOT IN`.
    In(Vec<Lit>, bool),
    /// `IS NULL`; `true`: `IS NOT NULL`.
    Null(bool),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A literal of the column's own type (no affinity conversion can apply).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Lit {
    Int(i64),
    Str(String),
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// A bare word, as written.
    Word(String),
    /// A `"quoted"` identifier.
    Quoted(String),
    /// A `'string'` literal.
    Str(String),
    Int(i64),
    Sym(&'static str),
}

const SYMBOLS: [&str; 16] = [
    "<=", ">=", "<>", "!=", "==", "(", ")", ",", "*", "+", "-", ".", "=", "<", ">", ";",
];

/// The statement's tokens; `None` for anything outside the subset (a real number, a blob,
/// a bracketed identifier, a parameter).
fn tokens(sql: &str) -> Option<Vec<Tok>> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if sql[i..].starts_with("--") {
            i = sql[i..].find('\n').map_or(b.len(), |n| i + n);
        } else if sql[i..].starts_with("/*") {
            i = i + 2 + sql[i + 2..].find("*/")? + 2;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let n = b[i..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || **c == b'$')
                .count();
            out.push(Tok::Word(sql[i..i + n].to_string()));
            i += n;
        } else if c.is_ascii_digit() {
            let n = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            if b.get(i + n)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'.')
            {
                return None;
            }
            out.push(Tok::Int(sql[i..i + n].parse().ok()?));
            i += n;
        } else if c == b'\'' || c == b'"' {
            let (text, end) = quoted(sql, i)?;
            out.push(if c == b'\'' {
                Tok::Str(text)
            } else {
                Tok::Quoted(text)
            });
            i = end;
        } else {
            let s = SYMBOLS.iter().find(|s| sql[i..].starts_with(**s))?;
            out.push(Tok::Sym(s));
            i += s.len();
        }
    }
    Some(out)
}

/// The text of the quoted token starting at `start` (its quote doubled inside), and where it
/// ends.
fn quoted(sql: &str, start: usize) -> Option<(String, usize)> {
    let q = sql[start..].chars().next()?;
    let mut text = String::new();
    let mut chars = sql[start + 1..].char_indices().peekable();
    while let Some((k, c)) = chars.next() {
        if c == q {
            if chars.peek().map(|p| p.1) == Some(q) {
                chars.next();
            } else {
                return Some((text, start + 1 + k + 1));
            }
        }
        text.push(c);
    }
    None
}

struct Parser<'a> {
    toks: &'a [Tok],
    at: usize,
    table: &'static Table,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn next(&mut self) -> Option<&Tok> {
        self.at += 1;
        self.toks.get(self.at - 1)
    }

    /// Takes the keyword `kw` (any case) if it comes next.
    fn keyword(&mut self, kw: &str) -> bool {
        let hit = matches!(self.peek(), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(kw));
        self.at += usize::from(hit);
        hit
    }

    fn sym(&mut self, s: &str) -> bool {
        let hit = self.peek()
            == Some(&Tok::Sym(match SYMBOLS.iter().find(|x| **x == s) {
                Some(x) => x,
                None => return false,
            }));
        self.at += usize::from(hit);
        hit
    }

    fn expect_sym(&mut self, s: &str) -> Option<()> {
        self.sym(s).then_some(())
    }

    /// A column of the table, named bare or quoted (SQLite matches names in any case).
    fn column(&mut self) -> Option<Col> {
        let name = match self.next()? {
            Tok::Word(w) if !is_keyword(w) => w.clone(),
            Tok::Quoted(w) => w.clone(),
            _ => return None,
        };
        column_named(self.table, &name)
    }

    fn literal(&mut self) -> Option<Lit> {
        Some(match self.next()? {
            Tok::Int(i) => Lit::Int(*i),
            Tok::Str(s) => Lit::Str(s.clone()),
            Tok::Sym("-") => match self.next()? {
                Tok::Int(i) => Lit::Int(-*i),
                _ => return None,
            },
            _ => return None,
        })
    }

    fn item(&mut self) -> Option<Item> {
        let func = match self.toks.get(self.at..(self.at + 2).min(self.toks.len())) {
            Some([Tok::Word(w), Tok::Sym("(")]) => w.to_ascii_lowercase(),
            _ => return Some(Item::Key(self.column()?)),
        };
        self.at += 2;
        let distinct = self.keyword("distinct");
        let func = match (func.as_str(), distinct) {
            ("count", false) if self.sym("*") => {
                self.expect_sym(")")?;
                return Some(Item::Agg(Func::CountAll, Arg::Star));
            }
            ("count", false) => Func::Count,
            ("count", true) => Func::CountDistinct,
            ("sum", false) => Func::Sum,
            ("total", false) => Func::Total,
            ("avg", false) => Func::Avg,
            ("min", false) => Func::Min,
            ("max", false) => Func::Max,
            _ => return None,
        };
        let a = self.column()?;
        let arg = if self.sym("+") {
            Arg::Add(a, self.column()?)
        } else if self.sym("-") {
            Arg::Sub(a, self.column()?)
        } else {
            Arg::Col(a)
        };
        self.expect_sym(")")?;
        let ok = match arg {
            Arg::Col(c) => match c.ty {
                ColType::Int64 => true,
                ColType::Utf8 => matches!(
                    func,
                    Func::Count | Func::CountDistinct | Func::Min | Func::Max
                ),
                ColType::Float64 => false,
            },
            Arg::Add(a, b) | Arg::Sub(a, b) => {
                a.ty == ColType::Int64 && b.ty == ColType::Int64 && func != Func::CountDistinct
            }
            Arg::Star => false,
        };
        ok.then_some(Item::Agg(func, arg))
    }

    fn cond(&mut self) -> Option<Cond> {
        let col = self.column()?;
        let test = if self.keyword("is") {
            let not = self.keyword("not");
            self.keyword("null").then_some(Test::Null(not))?
        } else if self.keyword("not") {
            self.keyword("in").then_some(())?;
            Test::In(self.list()?, true)
        } else if self.keyword("in") {
            Test::In(self.list()?, false)
        } else {
            let op = match self.next()? {
                Tok::Sym("=" | "==") => Op::Eq,
                Tok::Sym("<>" | "!=") => Op::Ne,
                Tok::Sym("<") => Op::Lt,
                Tok::Sym("<=") => Op::Le,
                Tok::Sym(">") => Op::Gt,
                Tok::Sym(">=") => Op::Ge,
                _ => return None,
            };
            Test::Cmp(op, self.literal()?)
        };
        let fits = |l: &Lit| {
            matches!(
                (l, col.ty),
                (Lit::Int(_), ColType::Int64) | (Lit::Str(_), ColType::Utf8)
            )
        };
        let ok = match &test {
            Test::Cmp(_, l) => fits(l),
            Test::In(ls, _) => ls.iter().all(fits),
            Test::Null(_) => col.ty != ColType::Float64,
        };
        ok.then_some(Cond { col, test })
    }

    fn list(&mut self) -> Option<Vec<Lit>> {
        self.expect_sym("(")?;
        let mut out = vec![self.literal()?];
        while self.sym(",") {
            out.push(self.literal()?);
        }
        self.expect_sym(")")?;
        Some(out)
    }
}

/// Words that end an item or a clause; a bare column of that name is not taken as one.
fn is_keyword(w: &str) -> bool {
    [
        "select", "from", "where", "group", "by", "order", "limit", "offset", "and", "or", "not",
        "in", "is", "null", "as", "asc", "desc", "having", "distinct", "all", "collate",
    ]
    .iter()
    .any(|k| w.eq_ignore_ascii_case(k))
}

/// The statement as an `Aggregate`, or `None` when it is not of that shape.
pub(super) fn aggregate(sql: &str) -> Option<Aggregate> {
    let toks = tokens(sql)?;
    // The table first: the items' names are resolved against it.
    let from = toks
        .iter()
        .position(|t| matches!(t, Tok::Word(w) if w.eq_ignore_ascii_case("from")))?;
    let table = match toks.get(from + 1)? {
        Tok::Word(w) | Tok::Quoted(w) => schema::table(&w.to_ascii_lowercase())?,
        _ => return None,
    };
    let mut p = Parser {
        toks: &toks,
        at: 0,
        table,
    };
    p.keyword("select").then_some(())?;
    let mut items = Vec::new();
    let mut aliases: Vec<Option<String>> = Vec::new();
    loop {
        items.push(p.item()?);
        let alias = if p.keyword("as") || matches!(p.peek(), Some(Tok::Word(w)) if !is_keyword(w)) {
            match p.next()? {
                Tok::Word(w) | Tok::Quoted(w) | Tok::Str(w) => Some(w.clone()),
                _ => return None,
            }
        } else {
            None
        };
        // An alias that is also a column name resolves differently in WHERE, GROUP BY and
        // ORDER BY: not worth the risk.
        if let Some(a) = &alias {
            if columns(table).any(|c| c.name.eq_ignore_ascii_case(a))
                && items.last() != Some(&Item::Key(column_named(table, a)?))
            {
                return None;
            }
        }
        aliases.push(alias);
        if !p.sym(",") {
            break;
        }
    }
    (p.at == from).then_some(())?;
    p.at += 2;
    let mut filter = Vec::new();
    if p.keyword("where") {
        loop {
            filter.push(p.cond()?);
            if !p.keyword("and") {
                break;
            }
        }
    }
    let mut keys = Vec::new();
    if p.keyword("group") {
        p.keyword("by").then_some(())?;
        loop {
            // A key named twice groups as once (and polars refuses a repeated column).
            let k = p.column()?;
            if !keys.contains(&k) {
                keys.push(k);
            }
            if !p.sym(",") {
                break;
            }
        }
    }
    // A bare column beside aggregates is a group key; without GROUP BY, SQLite gives it a
    // value of an arbitrary row, which is not pushed down.
    let aggregates = items.iter().filter(|i| matches!(i, Item::Agg(..))).count();
    if aggregates == 0
        || items
            .iter()
            .any(|i| matches!(i, Item::Key(c) if !keys.contains(c)))
    {
        return None;
    }
    let tail = tail(&mut p, &items, &aliases)?;
    p.sym(";");
    (p.at == toks.len()).then_some(Aggregate {
        table,
        items,
        filter,
        keys,
        tail,
    })
}

fn column_named(t: &'static Table, name: &str) -> Option<Col> {
    columns(t)
        .find(|c| c.name.eq_ignore_ascii_case(name))
        .map(Col)
}

/// `ORDER BY` and `LIMIT`, every order term as a result position (1-based, as SQLite takes
/// it): an alias, a result column's name, a position, or an aggregate written like a result
/// column's.
fn tail(p: &mut Parser<'_>, items: &[Item], aliases: &[Option<String>]) -> Option<String> {
    let mut out = String::new();
    if p.keyword("order") {
        p.keyword("by").then_some(())?;
        let mut terms = Vec::new();
        loop {
            let pos = match p.peek()? {
                Tok::Int(k) => {
                    let k = usize::try_from(*k).ok()?;
                    p.at += 1;
                    (1..=items.len()).contains(&k).then_some(k)?
                }
                Tok::Word(w) | Tok::Quoted(w)
                    if aliases
                        .iter()
                        .any(|a| a.as_deref().is_some_and(|a| a.eq_ignore_ascii_case(w))) =>
                {
                    let w = w.clone();
                    p.at += 1;
                    1 + aliases
                        .iter()
                        .position(|a| a.as_deref().is_some_and(|a| a.eq_ignore_ascii_case(&w)))?
                }
                _ => {
                    let item = p.item()?;
                    1 + items.iter().position(|i| *i == item)?
                }
            };
            let dir = if p.keyword("desc") {
                " DESC"
            } else {
                p.keyword("asc");
                ""
            };
            terms.push(format!("{pos}{dir}"));
            if !p.sym(",") {
                break;
            }
        }
        out = format!(" ORDER BY {}", terms.join(", "));
    }
    if p.keyword("limit") {
        let Tok::Int(n) = *p.next()? else {
            return None;
        };
        out.push_str(&format!(" LIMIT {n}"));
        if p.keyword("offset") {
            let Tok::Int(m) = *p.next()? else {
                return None;
            };
            out.push_str(&format!(" OFFSET {m}"));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_statement_is_recognised_with_its_tail_as_positions() {
        let q = aggregate(
            "SELECT run, category, COUNT(*) AS n, SUM(end_ns - start_ns) AS gpu_ns \
             FROM gpu_activities GROUP BY run, category ORDER BY run, n DESC LIMIT 3;",
        )
        .unwrap();
        assert_eq!(q.table.name, "gpu_activities");
        assert_eq!(q.keys.len(), 2);
        assert_eq!(q.tail, " ORDER BY 1, 3 DESC LIMIT 3");
        // A key as the statement's last word.
        let q = aggregate(
            "SELECT run, COUNT(*) FROM gpu_activities GROUP BY run ORDER BY SUM(bytes), run",
        );
        assert!(q.is_none(), "SUM(bytes) is no result column");
        let q = aggregate("SELECT run, count(*) FROM gpu_activities GROUP BY run ORDER BY run");
        assert_eq!(q.unwrap().tail, " ORDER BY 1");
    }
}
