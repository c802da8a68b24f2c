//! Stored messages read for display: the same messages `messages::list` and `by_ids` give,
//! each text in them longer than `max` characters cut to its first `max` (`StoredMessage.folded`
//! names each cut text and its length), and a page of any one of those texts.
//!
//! Why not read the rows and cut the texts afterwards: a 20 MB tool result is 20 MB in each of
//! the row's columns that hold it (the message's `content`, the part's `text_content`, its
//! `metadata.raw` for a block kept as sent), then in the rebuilt block; sixteen operators
//! opening it at once held gigabytes. Here a column of at most `READ_WHOLE_BYTES` is read as
//! it is (nearly every one), and a longer one never whole: the SQL asks for its byte length
//! only (`octet_length`, which neither engine reads the value for), then its text is streamed
//! (SQLite's incremental blob reads, PostgreSQL's `substr` and `char_length` on the server)
//! for the window shown and its length in characters.
//!
//! How the cut texts find their way into the rebuilt blocks: each long column (or each long
//! string inside a long JSON column, `fold::fold_json`) is replaced by a placeholder string,
//! the message is rebuilt by `messages::stored_content`, the one rebuilder, as every stored
//! message is, and the placeholders in the result are then replaced by their windows. A
//! message read here is therefore the message `messages::by_ids` gives, but for its long
//! texts, whatever shape its blocks have.
//!
//! `damaged` is the full read's for every text the message shows (each is read through to be
//! counted, its bytes checked on the way) and every long JSON column it is rebuilt from; a long
//! column the rebuilt message does not show (a part's `text_content` when its block is kept
//! under `metadata.raw`) is not read, so bytes in it that are not UTF-8 go unreported here.

use std::hash::{BuildHasher, Hasher};

use rusqlite::params;
use serde_json::Value;

use super::messages::{self, FoldedText, MessageRow, StoredMessage, StoredPart};
use crate::error::{LcmError, Result};
use crate::fold::{self, Target, Window};
use crate::sql::Db;

/// A column of at most this many bytes is read whole (and its texts cut in memory); a longer
/// one is streamed.
pub(crate) const READ_WHOLE_BYTES: i64 = 64 * 1024;

/// Characters PostgreSQL hands out per round trip when a long JSON column is streamed.
const PG_CHUNK_CHARS: i64 = 256 * 1024;

/// Reads of long rows at once in this process, at most (the machine's cores, up to 4). Such a
/// read is CPU work on lcm-native's blocking threads however little of the row it keeps:
/// SQLite reaches a column stored after a 20 MB one by walking that one's chain of overflow
/// pages (the time, the part and its metadata all come after the text), and a long text is
/// streamed through once to count it (about 15 ms each for 20 MB). Sixteen operators opening
/// one at once ran some ninety of those side by side, and every other call (a list of
/// conversations, 25 ms alone) waited for its share of two cores: 300 ms. In line, a read of a
/// long row waits; the others do not.
fn long_reads() -> &'static Gate {
    static GATE: std::sync::OnceLock<Gate> = std::sync::OnceLock::new();
    GATE.get_or_init(|| Gate {
        free: std::sync::Mutex::new(std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 4)),
        freed: std::sync::Condvar::new(),
    })
}

/// A counting semaphore of blocking threads.
struct Gate {
    free: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

/// A place among the `long_reads`, given back when dropped.
struct Pass(&'static Gate);

impl Gate {
    fn enter(&'static self) -> Pass {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        Pass(self)
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// Strings inside a long JSON column at most this long are read into the rebuilt value as they
/// are (the rebuild reads a block's `type`, a call's id: those must be whole, and a display cuts
/// them later as it cuts any text); longer ones are stood in for. The same while a page is looked
/// for (any size would find the same text; this one keeps what the lookup holds small).
const IN_JSON_WHOLE: usize = 1024;

/// A page of one text of a message (what `messageText` answers, less the ids).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TextPage {
    pub conversation_id: i64,
    pub text: String,
    pub chars: u64,
}

/// The row a long text is in.
#[derive(Clone, Debug, PartialEq, Eq)]
enum RowKey {
    /// `messages.content`: SQLite's rowid of the row, PostgreSQL's message id.
    Message(i64),
    /// A column of `message_parts`: SQLite opens it by rowid, PostgreSQL finds it by part id.
    Part { rowid: i64, part_id: String },
}

/// A column of one row, holding a text too long to read whole.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Place {
    row: RowKey,
    column: &'static str,
}

/// What a placeholder stands for.
#[derive(Debug)]
enum Stand {
    /// The column's whole text (not read until it is shown).
    Column(Place),
    /// The `index`-th long string of the column's JSON, its first characters read already,
    /// and its length as serde_json writes it (`FoldedJson::json_chars`).
    InJson {
        place: Place,
        index: usize,
        window: Window,
        json_chars: u64,
    },
}

/// A placeholder found in a rebuilt string.
enum Found {
    /// The string is the placeholder: it is that text.
    Whole(usize),
    /// The string holds placeholders among other text: a column's JSON written out as text
    /// (a block rebuilt from `metadata` as a whole), shown as `Reader::inside` says.
    Inside,
}

/// Reads messages with their long texts stood in for, then shows (or pages) those texts.
pub(crate) struct Reader<'a> {
    db: Db<'a>,
    max: usize,
    /// `\u{FDD0}lcm-native:<random>:` (a noncharacter, then a number no stored text holds).
    prefix: String,
    stands: Vec<Stand>,
    /// This reader's place among the reads of long rows (`long_reads`), taken once it meets one.
    pass: std::cell::OnceCell<Pass>,
}

impl Drop for Reader<'_> {
    /// A SQLite reader that streamed a long text holds its pages in its cache (8 MiB of
    /// them, for each of the connections streaming at once): given back, as the pages of the
    /// next reads are not those.
    fn drop(&mut self) {
        if let (Db::Sqlite(conn), Some(_)) = (self.db, self.pass.get()) {
            let _ = conn.release_memory();
        }
    }
}

impl<'a> Reader<'a> {
    pub(crate) fn new(db: Db<'a>, max: usize) -> Reader<'a> {
        let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
        Reader {
            db,
            max,
            prefix: format!("\u{FDD0}lcm-native:{random:016x}:"),
            stands: Vec::new(),
            pass: std::cell::OnceCell::new(),
        }
    }

    /// Waits for this reader's place among the reads of long rows (once).
    fn hold(&self) {
        self.pass.get_or_init(|| long_reads().enter());
    }

    /// The placeholder of `stands[i]`.
    fn placeholder(prefix: &str, i: usize) -> String {
        format!("{prefix}{i}\u{FDD1}")
    }

    /// A new placeholder, standing for `stand`.
    fn stand(&mut self, stand: Stand) -> String {
        self.stands.push(stand);
        Reader::placeholder(&self.prefix, self.stands.len() - 1)
    }

    /// The placeholder `s` is, or holds (the first).
    fn found(&self, s: &str) -> Option<Found> {
        if let Some(rest) = s.strip_prefix(&self.prefix) {
            if let Some(i) = rest.strip_suffix('\u{FDD1}').and_then(|n| n.parse::<usize>().ok()) {
                if i < self.stands.len() {
                    return Some(Found::Whole(i));
                }
            }
        }
        let at = s.find(&self.prefix)?;
        let rest = &s[at + self.prefix.len()..];
        let digits = rest.find('\u{FDD1}')?;
        let i = rest[..digits].parse::<usize>().ok()?;
        (i < self.stands.len()).then_some(Found::Inside)
    }

    /// `s` cut after each placeholder of a long JSON string in it: the text before it, and its
    /// stand (none after the last). Only those are ever inside another string: a whole
    /// column's placeholder is not JSON, so no rebuilt value holds it but as itself.
    fn split<'s>(&self, s: &'s str) -> Vec<(&'s str, Option<usize>)> {
        let mut out = Vec::new();
        let (mut start, mut from) = (0, 0);
        while let Some(k) = s[from..].find(&self.prefix) {
            let after = from + k + self.prefix.len();
            let stand = s[after..].find('\u{FDD1}').and_then(|d| {
                let i = s[after..after + d].parse::<usize>().ok()?;
                matches!(self.stands.get(i), Some(Stand::InJson { .. }))
                    .then_some((i, after + d + '\u{FDD1}'.len_utf8()))
            });
            match stand {
                Some((i, end)) => {
                    out.push((&s[start..from + k], Some(i)));
                    (start, from) = (end, end);
                }
                None => from = after,
            }
        }
        out.push((&s[start..], None));
        out
    }

    /// Messages of a conversation in order, from `after_seq` (exclusive), at most `limit`, each
    /// long text shown folded (`messages::list`'s, but for those).
    pub(crate) fn list(&mut self, conversation_id: i64, after_seq: i64, limit: i64) -> Result<Vec<StoredMessage>> {
        super::conversations::get(self.db, conversation_id)?;
        let from = "FROM messages m WHERE m.conversation_id = ?1 AND m.seq > ?2 ORDER BY m.seq LIMIT ?3";
        let mut out = self.read(from, params![conversation_id, after_seq, limit])?;
        out.iter_mut().map(|(m, _)| self.show(m)).collect::<Result<Vec<()>>>()?;
        Ok(out.into_iter().map(|(m, _)| m).collect())
    }

    /// The messages with these ids (those that exist), in the order given, each long text
    /// shown folded, with their parts (whose long texts are placeholders still).
    pub(crate) fn by_ids(&mut self, ids: &[i64]) -> Result<Vec<(StoredMessage, Vec<StoredPart>)>> {
        let mut out = self.read_ids(ids)?;
        for (m, _) in &mut out {
            self.show(m)?;
        }
        Ok(out)
    }

    /// The messages with these ids, their long texts still placeholders.
    fn read_ids(&mut self, ids: &[i64]) -> Result<Vec<(StoredMessage, Vec<StoredPart>)>> {
        let from = format!(
            "FROM {} j JOIN messages m ON m.message_id = j.value ORDER BY j.key",
            self.db.id_list("?1")
        );
        self.read(&from, params![serde_json::to_string(ids)?])
    }

    /// `messages`' columns, the content's value only when it is short (`messages::MessageRow`,
    /// then the content's value and length, then the row's key).
    fn message_columns(&self) -> String {
        let rowid = match self.db {
            Db::Sqlite(_) => "m.rowid",
            Db::Pg(_) => "m.message_id",
        };
        format!(
            "{}, {}, {rowid}",
            messages::MESSAGE_COLUMNS,
            short_or_length("m.content")
        )
    }

    /// The messages `from` (the query past its columns, over `messages m`) selects, each rebuilt
    /// from its parts, the long texts stood in for. First the rows' byte lengths only (which
    /// neither engine reads the values for): with a long one among them, in line (`long_reads`).
    fn read(&mut self, from: &str, args: &[&dyn rusqlite::ToSql]) -> Result<Vec<(StoredMessage, Vec<StoredPart>)>> {
        let mut ids: Vec<i64> = Vec::new();
        let mut long = false;
        self.db.query_each(
            &format!("SELECT m.message_id, octet_length(m.content) {from}"),
            args,
            |r| {
                ids.push(r.get(0)?);
                long |= r.get::<Option<i64>>(1)?.unwrap_or(0) > READ_WHOLE_BYTES;
                Ok(true)
            },
        )?;
        if !long && !ids.is_empty() {
            let any = |c: &str| format!("octet_length(p.{c}) > {READ_WHOLE_BYTES}");
            let sql = format!(
                "SELECT 1 FROM message_parts p WHERE p.message_id {} AND ({} OR {} OR {} OR {}) LIMIT 1",
                self.db.in_ids("?1"),
                any("text_content"),
                any("tool_input"),
                any("tool_output"),
                any("metadata"),
            );
            long = self
                .db
                .query_row(&sql, params![serde_json::to_string(&ids)?], |_| Ok(()))?
                .is_some();
        }
        if long {
            self.hold();
        }
        let sql = format!("SELECT {} {from}", self.message_columns());
        type Content = (Option<String>, Option<i64>, i64);
        let rows: Vec<(MessageRow, Content)> = self.db.query_map(&sql, args, |r| {
            MessageRow::read(r, |r, at| Ok((r.get(at)?, r.get(at + 1)?, r.get(at + 2)?)))
        })?;
        let ids: Vec<i64> = rows.iter().map(|(r, _)| r.id()).collect();
        let parts = self.parts(&ids)?;
        let mut out = Vec::with_capacity(rows.len());
        for ((row, (content, bytes, rowid)), parts) in rows.into_iter().zip(parts) {
            let content = match (content, bytes) {
                (Some(c), _) => c,
                (None, Some(_)) => self.stand(Stand::Column(Place {
                    row: RowKey::Message(rowid),
                    column: "content",
                })),
                (None, None) => String::new(),
            };
            out.push((row.into_stored(&content, &parts), parts));
        }
        Ok(out)
    }

    /// The parts of the messages, grouped in `ids` order, each long column a placeholder
    /// (`messages::load_parts`, but for those).
    fn parts(&mut self, ids: &[i64]) -> Result<Vec<Vec<StoredPart>>> {
        let mut out: Vec<Vec<(i64, StoredPart)>> = (0..ids.len()).map(|_| Vec::new()).collect();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let index: std::collections::HashMap<i64, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let (rowid, from) = match self.db {
            Db::Sqlite(_) => (
                "p.rowid",
                format!(
                    "{} j JOIN message_parts p ON p.message_id = j.value",
                    self.db.id_list("?1")
                ),
            ),
            // As `load_parts` reads them on PostgreSQL (an index lookup, not a join).
            Db::Pg(_) => (
                "0",
                format!("message_parts p WHERE p.message_id {}", self.db.in_ids("?1")),
            ),
        };
        let sql = format!(
            "SELECT p.message_id, p.part_id, p.part_type, p.tool_call_id, p.tool_name, p.ordinal, {rowid}, {}, {}, {}, {}
             FROM {from}",
            short_or_length("p.text_content"),
            short_or_length("p.tool_input"),
            short_or_length("p.tool_output"),
            short_or_length("p.metadata"),
        );
        let mut raws: Vec<(usize, i64, RawPart)> = Vec::new();
        self.db.query_each(&sql, params![serde_json::to_string(ids)?], |r| {
            let lossy = crate::sql::lossy_reads();
            let mid: i64 = r.get(0)?;
            let mut raw = RawPart {
                part_id: r.get(1)?,
                part_type: r.get(2)?,
                tool_call_id: r.get(3)?,
                tool_name: r.get(4)?,
                rowid: r.get(6)?,
                columns: [
                    (r.get(7)?, r.get(8)?),
                    (r.get(9)?, r.get(10)?),
                    (r.get(11)?, r.get(12)?),
                    (r.get(13)?, r.get(14)?),
                ],
                damaged: false,
            };
            raw.damaged = crate::sql::lossy_reads() != lossy;
            if let Some(&i) = index.get(&mid) {
                raws.push((i, r.get(5)?, raw));
            }
            Ok(true)
        })?;
        for (i, ordinal, raw) in raws {
            let part = self.part(raw)?;
            out[i].push((ordinal, part));
        }
        Ok(out
            .into_iter()
            .map(|mut parts| {
                parts.sort_by_key(|(o, _)| *o);
                parts.into_iter().map(|(_, p)| p).collect()
            })
            .collect())
    }

    /// One part, each of its long columns replaced: a plain text by a placeholder of the
    /// whole column; JSON the rebuild parses (the metadata, a tool call's input, a tool's
    /// object output) by the same JSON with each long string a placeholder.
    fn part(&mut self, raw: RawPart) -> Result<StoredPart> {
        let RawPart {
            part_id,
            part_type,
            tool_call_id,
            tool_name,
            rowid,
            columns,
            damaged,
        } = raw;
        let [text, input, output, metadata] = columns;
        let tool_call = part_type == "tool" && tool_call_id.is_some() && tool_name.is_some();
        // Which long columns the rebuild reads as JSON (`messages::block_from_columns`): a
        // tool call's input becomes its arguments; an object output becomes the block, unless
        // the part is a call (its output is then not read).
        let has_input = input.0.is_some() || input.1.is_some();
        let uses_output_json = !(tool_call && has_input);
        let place = |column| Place {
            row: RowKey::Part {
                rowid,
                part_id: part_id.clone(),
            },
            column,
        };
        let mut damaged = damaged;
        let text = self.column(text, place("text_content"), Json::No, &mut damaged)?;
        let input_json = if tool_call { Json::Any } else { Json::No };
        let input = self.column(input, place("tool_input"), input_json, &mut damaged)?;
        let output_json = if uses_output_json { Json::Object } else { Json::No };
        let output = self.column(output, place("tool_output"), output_json, &mut damaged)?;
        let metadata = self.column(metadata, place("metadata"), Json::Any, &mut damaged)?;
        Ok(StoredPart::new(
            part_id,
            part_type,
            text,
            tool_call_id,
            tool_name,
            input,
            output,
            metadata,
            damaged,
        ))
    }

    /// A column's value: as read when short; else a placeholder of the whole text, or (`json`)
    /// its JSON folded when it is JSON of that kind (`damaged` then when any of it was not
    /// UTF-8, as the full read finds; a plain text says so when it is shown).
    fn column(
        &mut self,
        (value, bytes): (Option<String>, Option<i64>),
        place: Place,
        json: Json,
        damaged: &mut bool,
    ) -> Result<Option<String>> {
        if value.is_some() || bytes.is_none() {
            return Ok(value);
        }
        self.hold();
        if json != Json::No {
            let base = self.stands.len();
            let prefix = self.prefix.clone();
            let name = |i: usize| Reader::placeholder(&prefix, base + i);
            if let Some(f) = place.fold_json(self.db, self.max, &[], &name)? {
                if json == Json::Any || f.json.starts_with('{') {
                    for (index, (window, json_chars)) in f.long.into_iter().zip(f.json_chars).enumerate() {
                        self.stands.push(Stand::InJson {
                            place: place.clone(),
                            index,
                            window,
                            json_chars,
                        });
                    }
                    *damaged |= f.lossy;
                    return Ok(Some(f.json));
                }
            }
        }
        Ok(Some(self.stand(Stand::Column(place))))
    }

    /// Replaces each placeholder of the message by its first `max` characters and cuts each
    /// other text longer than that, naming every text it cut in `folded`.
    fn show(&mut self, m: &mut StoredMessage) -> Result<()> {
        let mut folded = Vec::new();
        let mut lossy = false;
        match &mut m.content {
            Value::Array(blocks) => {
                for (i, b) in blocks.iter_mut().enumerate() {
                    self.walk(b, Some(i), &mut String::new(), &mut folded, &mut lossy)?;
                }
            }
            other => self.walk(other, None, &mut String::new(), &mut folded, &mut lossy)?,
        }
        // A call id as it is read (from a short column, or a string of a long metadata whole
        // up to `IN_JSON_WHOLE`); a longer one is shown cut, as any text.
        if let Some(id) = &mut m.tool_call_id {
            if self.found(id).is_some() {
                if let Some(w) = self.window_of(id)? {
                    *id = w.text;
                }
            }
        }
        if lossy {
            m.damaged = Some(true);
        }
        m.folded = (!folded.is_empty()).then_some(folded);
        Ok(())
    }

    fn walk(
        &mut self,
        v: &mut Value,
        block: Option<usize>,
        path: &mut String,
        folded: &mut Vec<FoldedText>,
        lossy: &mut bool,
    ) -> Result<()> {
        match v {
            // A block's `type` is what every reader of the block goes by: not a text to cut
            // (one longer than `IN_JSON_WHOLE` in a long column is shown as its window still).
            Value::String(s) if block.is_some() && path == "/type" && self.found(s).is_none() => {}
            Value::String(s) => {
                if let Some(w) = self.window_of(s)? {
                    *lossy |= w.lossy;
                    if w.chars > self.max as u64 {
                        folded.push(FoldedText {
                            block,
                            path: path.clone(),
                            chars: w.chars,
                        });
                    }
                    *s = w.text;
                }
            }
            Value::Array(items) => {
                for (i, x) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&i.to_string());
                    self.walk(x, block, path, folded, lossy)?;
                    path.truncate(len);
                }
            }
            Value::Object(fields) => {
                for (k, x) in fields.iter_mut() {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    self.walk(x, block, path, folded, lossy)?;
                    path.truncate(len);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// What a rebuilt string is to be shown as: the window of the text a placeholder stands
    /// for, or its own first `max` characters when it is longer; `None` when it is shown as
    /// it is.
    fn window_of(&self, s: &str) -> Result<Option<Window>> {
        let found = self.found(s);
        if found.is_some() {
            self.hold();
        }
        Ok(match found {
            Some(Found::Whole(i)) => Some(match &self.stands[i] {
                Stand::Column(place) => place.window(self.db, 0, self.max)?,
                Stand::InJson { window, .. } => window.clone(),
            }),
            Some(Found::Inside) => Some(self.inside(s, 0, self.max)?),
            None => fold::cut(s, self.max).map(|(head, chars)| Window {
                text: head.to_string(),
                chars,
                lossy: false,
            }),
        })
    }

    fn column_of(&self, i: usize) -> &Place {
        match &self.stands[i] {
            Stand::Column(place) | Stand::InJson { place, .. } => place,
        }
    }

    /// Characters `offset .. offset + take` of the text a string holding placeholders of long
    /// JSON strings stands for, and its length. Such a string is a long column's JSON written
    /// out whole (a block rebuilt from `metadata` by `to_string`), and the full read shows
    /// serde_json's writing of the stored JSON, not the column's text (which may have spaces,
    /// escapes, `1e+21`): `s` with each placeholder as serde_json writes its string. A page
    /// within a string's window is cut from that; one further on is read (`pages`).
    fn inside(&self, s: &str, offset: u64, take: usize) -> Result<Window> {
        let to = offset.saturating_add(take as u64);
        let mut pieces: Vec<Piece> = Vec::new();
        let (mut at, mut lossy) = (0u64, false);
        for (text, stand) in self.split(s) {
            let n = text.chars().count() as u64;
            if at < to && at + n > offset {
                pieces.push(Piece::Text(
                    fold::chars_in(text, offset.saturating_sub(at), to - at).to_string(),
                ));
            }
            at += n;
            let Some(i) = stand else { continue };
            let Stand::InJson {
                index,
                window,
                json_chars,
                ..
            } = &self.stands[i]
            else {
                continue;
            };
            lossy |= window.lossy;
            if at < to && at + json_chars > offset {
                let (lo, hi) = (offset.saturating_sub(at), (to - at).min(*json_chars));
                // The window is the string's first characters: written out, they are the first
                // of the string written out (as many or more).
                let head = serde_json::to_string(&window.text)?;
                let head = head
                    .strip_prefix('"')
                    .and_then(|h| h.strip_suffix('"'))
                    .unwrap_or_default();
                if window.text.chars().count() as u64 == window.chars || head.chars().count() as u64 >= hi {
                    pieces.push(Piece::Text(fold::chars_in(head, lo, hi).to_string()));
                } else {
                    let target = Target {
                        index: *index,
                        offset: lo,
                        take: (hi - lo) as usize,
                        json: true,
                    };
                    pieces.push(Piece::Page(i, target));
                }
            }
            at += json_chars;
        }
        Ok(Window {
            text: self.pages(pieces)?,
            chars: at,
            lossy,
        })
    }

    /// `inside`'s pieces put together, the pages of long strings among them read: one read of
    /// each column they are in.
    fn pages(&self, pieces: Vec<Piece>) -> Result<String> {
        let mut reads: Vec<(&Place, Vec<Target>)> = Vec::new();
        for piece in &pieces {
            if let Piece::Page(i, target) = piece {
                let place = self.column_of(*i);
                match reads.iter_mut().find(|(p, _)| *p == place) {
                    Some((_, targets)) => targets.push(*target),
                    None => reads.push((place, vec![*target])),
                }
            }
        }
        let changed =
            |place: &Place| LcmError::Internal(format!("{}.{} changed while it was read", place.table(), place.column));
        let mut read: Vec<(&Place, Vec<Window>)> = Vec::new();
        for (place, targets) in reads {
            let f = place
                .fold_json(self.db, self.max, &targets, &|_| String::new())?
                .ok_or_else(|| changed(place))?;
            read.push((place, f.long));
        }
        let mut text = String::new();
        for piece in pieces {
            match piece {
                Piece::Text(t) => text.push_str(&t),
                Piece::Page(i, target) => {
                    let place = self.column_of(i);
                    let page = read
                        .iter()
                        .find(|(p, _)| *p == place)
                        .and_then(|(_, long)| long.get(target.index))
                        .ok_or_else(|| changed(place))?;
                    text.push_str(&page.text);
                }
            }
        }
        Ok(text)
    }

    /// Characters `offset .. offset + take` of the text at `block` and `path` of a message
    /// read by `read_ids`, and its length.
    fn page_of(&self, content: &Value, block: Option<usize>, path: &str, offset: u64, take: usize) -> Result<Window> {
        let s = text_at(content, block, path)?;
        let found = self.found(s);
        if found.is_some() {
            self.hold();
        }
        Ok(match found {
            Some(Found::Whole(i)) => match &self.stands[i] {
                Stand::Column(place) => place.window(self.db, offset, take)?,
                Stand::InJson { place, index, .. } => {
                    let target = Target {
                        index: *index,
                        offset,
                        take,
                        json: false,
                    };
                    let f = place.fold_json(self.db, self.max, &[target], &|_| String::new())?;
                    f.and_then(|f| f.long.into_iter().nth(*index))
                        .ok_or_else(|| LcmError::Internal(format!("the text at {path} changed while it was read")))?
                }
            },
            Some(Found::Inside) => self.inside(s, offset, take)?,
            None => {
                let (text, chars) = fold::slice(s, offset, take);
                Window {
                    text: text.to_string(),
                    chars,
                    lossy: false,
                }
            }
        })
    }
}

/// A piece of `Reader::inside`'s window: text, or a page of the long string of `stands[i]`
/// still to be read.
enum Piece {
    Text(String),
    Page(usize, Target),
}

/// A `message_parts` row as `Reader::parts` selects it.
struct RawPart {
    part_id: String,
    part_type: String,
    tool_call_id: Option<String>,
    tool_name: Option<String>,
    rowid: i64,
    /// text_content, tool_input, tool_output, metadata: each its value when short, and its
    /// byte length when it is not null.
    columns: [(Option<String>, Option<i64>); 4],
    damaged: bool,
}

/// How a long column is read when it is JSON.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Json {
    /// As a plain text.
    No,
    /// Folded, whatever JSON value it holds.
    Any,
    /// Folded when it holds an object, else as a plain text.
    Object,
}

/// A column as two: its value when it is at most `READ_WHOLE_BYTES` long (else null), and its
/// byte length (null when the column is). Neither engine reads a value for its byte length.
fn short_or_length(column: &str) -> String {
    format!("CASE WHEN octet_length({column}) <= {READ_WHOLE_BYTES} THEN {column} END, octet_length({column})")
}

/// The string at `block` and `path` of a message's content, or why there is none.
fn text_at<'v>(content: &'v Value, block: Option<usize>, path: &str) -> Result<&'v str> {
    let within = match (block, content) {
        (None, Value::String(_)) => content,
        (None, _) => {
            return Err(LcmError::invalid_input(
                "the message's content is a list of blocks: name one with `block`",
            ))
        }
        (Some(_), Value::String(_)) => {
            return Err(LcmError::invalid_input(
                "the message's content is one text, not blocks: leave `block` out",
            ))
        }
        (Some(i), Value::Array(blocks)) => blocks.get(i).ok_or_else(|| {
            LcmError::invalid_input(format!(
                "block {i} does not exist: the message has {} blocks",
                blocks.len()
            ))
        })?,
        (Some(i), _) => return Err(LcmError::invalid_input(format!("block {i} does not exist"))),
    };
    if !path.is_empty() && !path.starts_with('/') {
        return Err(LcmError::invalid_input(format!(
            "path {path:?} is not a JSON Pointer (\"/text\", \"/arguments/command\"; \"\" for the block itself)"
        )));
    }
    match within.pointer(path) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(LcmError::invalid_input(format!(
            "{} is {}, not a text",
            if path.is_empty() { "the block" } else { path },
            kind(other)
        ))),
        None => Err(LcmError::invalid_input(format!("the block has nothing at {path}"))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A page of one text of a message: the message's content as `by_ids` rebuilds it, the text
/// at `block` (its index; `None` for a string content) and `path` (a JSON Pointer into the
/// block), characters `offset .. offset + take`. E_NOT_FOUND for a message that does not
/// exist (or is not in conversation `within`, checked before anything of it is read),
/// E_INVALID_INPUT for a block or path that names no text, or an offset past its end.
#[allow(clippy::too_many_arguments)]
pub(crate) fn text_page(
    db: Db,
    message_id: i64,
    within: Option<i64>,
    block: Option<usize>,
    path: &str,
    offset: u64,
    take: usize,
) -> Result<TextPage> {
    let conversation_id = messages::conversations_of(db, &[message_id])?
        .pop()
        .map(|(_, c)| c)
        .filter(|c| within.is_none_or(|w| w == *c))
        .ok_or_else(|| LcmError::not_found("message", message_id))?;
    let mut reader = Reader::new(db, IN_JSON_WHOLE);
    let (m, _) = reader
        .read_ids(&[message_id])?
        .pop()
        .ok_or_else(|| LcmError::not_found("message", message_id))?;
    let w = reader.page_of(&m.content, block, path, offset, take)?;
    if offset > w.chars {
        return Err(LcmError::invalid_input(format!(
            "offset {offset} is past the end of the text ({} characters)",
            w.chars
        )));
    }
    Ok(TextPage {
        conversation_id,
        text: w.text,
        chars: w.chars,
    })
}

impl Place {
    /// The table's name for the engine's SQL, and the row's key column and value (PostgreSQL).
    fn table(&self) -> &'static str {
        match self.row {
            RowKey::Message(_) => "messages",
            RowKey::Part { .. } => "message_parts",
        }
    }

    /// Characters `offset .. offset + take` of the column's text, and its length.
    /// (Run with the reader's place among the reads of long rows held.)
    fn window(&self, db: Db, offset: u64, take: usize) -> Result<Window> {
        match db {
            Db::Sqlite(conn) => {
                let blob = self.blob(conn)?;
                fold::stream(blob, offset, take).map_err(read_error)
            }
            // The server cuts and counts: only the window crosses.
            Db::Pg(_) => {
                let (key, value) = self.pg_key();
                let sql = format!(
                    "SELECT substr({column}, ?2, ?3), char_length({column}) FROM {table} WHERE {key} = ?1",
                    column = self.column,
                    table = self.table(),
                );
                let start = i64::try_from(offset).unwrap_or(i64::MAX - 1).saturating_add(1);
                let found = db.query_row(&sql, params![value, start, take as i64], |r| {
                    Ok((r.get::<Option<String>>(0)?, r.get::<Option<i64>>(1)?))
                })?;
                match found {
                    Some((text, chars)) => Ok(Window {
                        text: text.unwrap_or_default(),
                        chars: chars.unwrap_or(0).max(0) as u64,
                        lossy: false,
                    }),
                    None => Err(LcmError::Internal(format!(
                        "{}.{} went away while it was read",
                        self.table(),
                        self.column
                    ))),
                }
            }
        }
    }

    /// The column's text read as JSON, each string longer than `IN_JSON_WHOLE` (or `keep`)
    /// characters stood in for, its window its first `keep` (or its page, `targets`;
    /// `fold::fold_json`).
    fn fold_json(
        &self,
        db: Db,
        keep: usize,
        targets: &[Target],
        placeholder: &dyn Fn(usize) -> String,
    ) -> Result<Option<fold::FoldedJson>> {
        let long = IN_JSON_WHOLE.max(keep);
        match db {
            Db::Sqlite(conn) => {
                let blob = self.blob(conn)?;
                fold::fold_json(blob, long, keep, targets, placeholder).map_err(read_error)
            }
            Db::Pg(_) => {
                let (key, value) = self.pg_key();
                let chunks = PgChunks {
                    db,
                    sql: format!(
                        "SELECT substr({column}, ?2, ?3) FROM {table} WHERE {key} = ?1",
                        column = self.column,
                        table = self.table(),
                    ),
                    key: value,
                    next: 1,
                    buf: Vec::new(),
                    at: 0,
                    done: false,
                };
                fold::fold_json(chunks, long, keep, targets, placeholder).map_err(read_error)
            }
        }
    }

    /// SQLite's incremental reader of the column (read-only, in the connection's snapshot).
    fn blob<'c>(&self, conn: &'c rusqlite::Connection) -> Result<rusqlite::blob::Blob<'c>> {
        let rowid = match &self.row {
            RowKey::Message(rowid) | RowKey::Part { rowid, .. } => *rowid,
        };
        Ok(conn.blob_open(rusqlite::MAIN_DB, self.table(), self.column, rowid, true)?)
    }

    fn pg_key(&self) -> (&'static str, rusqlite::types::Value) {
        match &self.row {
            RowKey::Message(id) => ("message_id", rusqlite::types::Value::Integer(*id)),
            RowKey::Part { part_id, .. } => ("part_id", rusqlite::types::Value::Text(part_id.clone())),
        }
    }
}

/// A PostgreSQL column's text as a byte stream, `PG_CHUNK_CHARS` characters a round trip.
struct PgChunks<'a> {
    db: Db<'a>,
    sql: String,
    key: rusqlite::types::Value,
    /// The next character to ask for (1-based, as `substr` counts).
    next: i64,
    buf: Vec<u8>,
    at: usize,
    done: bool,
}

impl std::io::Read for PgChunks<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.buf.len() && !self.done {
            let chunk: Option<String> = self
                .db
                .query_row(&self.sql, params![self.key, self.next, PG_CHUNK_CHARS], |r| r.get(0))
                .map_err(std::io::Error::other)?
                .flatten();
            let chunk = chunk.unwrap_or_default();
            self.done = chunk.is_empty();
            self.next += PG_CHUNK_CHARS;
            self.buf = chunk.into_bytes();
            self.at = 0;
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A failed streamed read as the core's error: the database's own error when it is one.
fn read_error(e: std::io::Error) -> LcmError {
    let text = e.to_string();
    let Some(inner) = e.into_inner() else {
        return LcmError::Internal(format!("reading a stored text: {text}"));
    };
    let inner = match inner.downcast::<LcmError>() {
        Ok(core) => return *core,
        Err(other) => other,
    };
    match inner.downcast::<rusqlite::Error>() {
        Ok(sqlite) => LcmError::from(*sqlite),
        Err(other) => LcmError::Internal(format!("reading a stored text: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::api::{DescribeOptions, MessagePage, TextRequest};
    use crate::engine::Engine;
    use crate::recall::ItemId;
    use crate::store::conversations::Target;
    use crate::store::messages::FoldedText;

    /// Texts of `n` characters mixing one-, two-, three- and four-byte characters (so cuts fall
    /// inside multi-byte runs), distinct per `seed`.
    fn text(n: usize, seed: u32) -> String {
        (0..n)
            .map(|i| match (i as u32 + seed) % 7 {
                0 => 'é',
                1 => '日',
                2 => '🚀',
                3 => '\n',
                4 => '"',
                _ => char::from(b'a' + ((i as u32 + seed) % 26) as u8),
            })
            .collect()
    }

    /// A conversation whose messages hold texts of every shape the rebuild gives: a string
    /// content (read whole and streamed), plain text blocks, blocks kept as sent under
    /// `metadata.raw` (a thinking block with its signature, a text with extra keys, a tool call
    /// whose arguments hold a command longer than PostgreSQL's chunk of a streamed JSON), texts
    /// of exactly the fold size, and short ones.
    fn messages(n: usize) -> Vec<Value> {
        vec![
            json!({ "role": "user", "content": text(120_000, 1), "timestamp": 1_764_000_000_000i64 }),
            json!({ "role": "assistant", "content": [
                { "type": "thinking", "thinking": text(90_000, 2), "thinkingSignature": "sig-1" },
                { "type": "text", "text": "short" },
                { "type": "toolCall", "id": "call_1", "name": "bash", "arguments": { "command": text(300_000, 3), "cwd": "/tmp" } },
            ], "timestamp": 1_764_000_001_000i64 }),
            json!({ "role": "toolResult", "toolCallId": "call_1", "toolName": "bash",
                    "content": [{ "type": "text", "text": text(300_000, 4) }], "timestamp": 1_764_000_002_000i64 }),
            json!({ "role": "user", "content": [
                { "type": "text", "text": text(70_000, 5), "cache_control": { "type": "ephemeral" } },
                { "type": "text", "text": text(5_000, 6) },
            ], "timestamp": 1_764_000_003_000i64 }),
            json!({ "role": "user", "content": text(n, 7), "timestamp": 1_764_000_004_000i64 }),
            json!({ "role": "user", "content": text(n + 1, 8), "timestamp": 1_764_000_005_000i64 }),
            json!({ "role": "assistant", "content": [], "timestamp": 1_764_000_006_000i64 }),
        ]
    }

    /// What folding the whole message gives: every string longer than `max` characters (but
    /// a block's `type`) cut there and named, found by walking the content `messages` rebuilds
    /// in full.
    fn reference(content: &Value, max: usize) -> (Value, Vec<FoldedText>) {
        fn walk(v: &mut Value, block: Option<usize>, path: String, max: usize, out: &mut Vec<FoldedText>) {
            match v {
                Value::String(_) if block.is_some() && path == "/type" => {}
                Value::String(s) => {
                    if let Some((head, chars)) = crate::fold::cut(s, max) {
                        out.push(FoldedText { block, path, chars });
                        *s = head.to_string();
                    }
                }
                Value::Array(items) => {
                    for (i, x) in items.iter_mut().enumerate() {
                        walk(x, block, format!("{path}/{i}"), max, out);
                    }
                }
                Value::Object(fields) => {
                    for (k, x) in fields.iter_mut() {
                        walk(
                            x,
                            block,
                            format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")),
                            max,
                            out,
                        );
                    }
                }
                _ => {}
            }
        }
        let mut v = content.clone();
        let mut out = Vec::new();
        match &mut v {
            Value::Array(blocks) => {
                for (i, b) in blocks.iter_mut().enumerate() {
                    walk(b, Some(i), String::new(), max, &mut out);
                }
            }
            other => walk(other, None, String::new(), max, &mut out),
        }
        (v, out)
    }

    fn page(max: usize) -> MessagePage {
        MessagePage {
            after_seq: 0,
            limit: 100,
            max_chars: Some(max),
        }
    }

    /// The whole check on one engine: each message read folded is the message read whole with
    /// its long texts cut, `describe` agrees, and pages put end to end give each text back.
    fn folds_and_pages(engine: &Engine, name: &str) {
        let max = 2_000;
        let cid = engine
            .ingest(&Target::Session(format!("folded-{name}")), &messages(max))
            .unwrap()
            .conversation_id;
        let whole = engine.messages(cid, 0, 100).unwrap();
        for max in [1, 2_000, 1_000_000] {
            let folded = engine.messages_page(cid, &page(max)).unwrap();
            assert_eq!(folded.len(), whole.len());
            for (f, w) in folded.iter().zip(&whole) {
                let (content, cut) = reference(&w.content, max);
                assert_eq!(f.content, content, "{name}: message {} at {max}", w.seq);
                assert_eq!(
                    f.folded.clone().unwrap_or_default(),
                    cut,
                    "{name}: message {} at {max}",
                    w.seq
                );
                // Everything but the texts is as read whole.
                let (mut a, mut b) = (serde_json::to_value(f).unwrap(), serde_json::to_value(w).unwrap());
                for v in [&mut a, &mut b] {
                    v.as_object_mut().unwrap().remove("content");
                    v.as_object_mut().unwrap().remove("folded");
                }
                assert_eq!(a, b, "{name}: message {}", w.seq);
                // describe with maxChars: the same message, and the rest of describe as without.
                let id = ItemId::Message(w.message_id);
                let d = engine
                    .describe_with(&id, DescribeOptions { max_chars: Some(max) })
                    .unwrap();
                let mut d = serde_json::to_value(d).unwrap();
                let mut plain = serde_json::to_value(engine.describe(&id).unwrap()).unwrap();
                assert_eq!(d["content"], content, "{name}: describe {}", w.seq);
                for v in [&mut d, &mut plain] {
                    v.as_object_mut().unwrap().remove("content");
                    v.as_object_mut().unwrap().remove("folded");
                }
                assert_eq!(d, plain, "{name}: describe {}", w.seq);
            }
        }
        // At 2,000: the long texts of every shape are folded (the exact size is not).
        let folded = engine.messages_page(cid, &page(max)).unwrap();
        let names: Vec<(i64, Option<usize>, &str)> = folded
            .iter()
            .flat_map(|m| {
                m.folded
                    .iter()
                    .flatten()
                    .map(move |f| (m.seq, f.block, f.path.as_str()))
            })
            .collect();
        assert_eq!(
            names,
            [
                (1, None, ""),
                (2, Some(0), "/thinking"),
                (2, Some(2), "/arguments/command"),
                (3, Some(0), "/text"),
                (4, Some(0), "/text"),
                (4, Some(1), "/text"),
                (6, None, ""),
            ],
            "{name}"
        );
        assert_eq!(folded[0].folded.as_ref().unwrap()[0].chars, 120_000);
        assert!(
            folded[4].folded.is_none(),
            "{name}: a text of exactly maxChars is whole"
        );
        // Pages of each folded text (and of a short one) put end to end are the text.
        for (m, w) in folded.iter().zip(&whole) {
            let mut texts: Vec<FoldedText> = m.folded.clone().unwrap_or_default();
            if m.seq == 2 {
                texts.push(FoldedText {
                    block: Some(1),
                    path: "/text".into(),
                    chars: 5,
                });
            }
            for t in texts {
                let full = match t.block {
                    None => w.content.as_str().unwrap().to_string(),
                    Some(b) => w.content[b].pointer(&t.path).unwrap().as_str().unwrap().to_string(),
                };
                let mut at = 0;
                let mut got = String::new();
                loop {
                    let request = TextRequest {
                        block: t.block.map(|b| b as i64),
                        path: Some(t.path.clone()),
                        offset: at,
                        limit: 7_777,
                        conversation_id: Some(cid),
                    };
                    let p = engine.message_text(w.message_id, &request).unwrap();
                    assert_eq!(
                        (p.chars, p.conversation_id, p.offset),
                        (t.chars, cid, at as u64),
                        "{name}"
                    );
                    got.push_str(&p.text);
                    match p.next_offset {
                        Some(next) => at = next as i64,
                        None => break,
                    }
                }
                assert_eq!(got, full, "{name}: pages of message {} {:?} {}", m.seq, t.block, t.path);
            }
        }
        // The defaults: a string content's text, a block's `/text`.
        let first = engine
            .message_text(whole[0].message_id, &TextRequest::default())
            .unwrap();
        assert_eq!((first.block, first.path.as_str(), first.chars), (None, "", 120_000));
        let req = TextRequest {
            block: Some(0),
            ..TextRequest::default()
        };
        assert_eq!(engine.message_text(whole[2].message_id, &req).unwrap().path, "/text");
        // A page at the end is empty; past it, and a block or path naming no text, are refused.
        let end = TextRequest {
            offset: 120_000,
            ..TextRequest::default()
        };
        let p = engine.message_text(whole[0].message_id, &end).unwrap();
        assert_eq!((p.text.as_str(), p.next_offset), ("", None));
        let refused = |id: i64, request: TextRequest| engine.message_text(id, &request).unwrap_err();
        let e = refused(
            whole[0].message_id,
            TextRequest {
                offset: 120_001,
                ..TextRequest::default()
            },
        );
        assert_eq!(e.code(), "E_INVALID_INPUT", "{e}");
        assert!(
            e.to_string().contains("past the end of the text (120000 characters)"),
            "{e}"
        );
        let e = refused(
            whole[0].message_id,
            TextRequest {
                block: Some(0),
                ..TextRequest::default()
            },
        );
        assert_eq!(e.code(), "E_INVALID_INPUT", "{e}");
        let e = refused(whole[1].message_id, TextRequest::default());
        assert!(e.to_string().contains("name one with `block`"), "{e}");
        let e = refused(
            whole[1].message_id,
            TextRequest {
                block: Some(9),
                ..TextRequest::default()
            },
        );
        assert!(e.to_string().contains("the message has 3 blocks"), "{e}");
        let e = refused(
            whole[1].message_id,
            TextRequest {
                block: Some(2),
                path: Some("/arguments".into()),
                ..TextRequest::default()
            },
        );
        assert!(e.to_string().contains("/arguments is an object, not a text"), "{e}");
        let e = refused(
            whole[1].message_id,
            TextRequest {
                block: Some(2),
                path: Some("/nothing".into()),
                ..TextRequest::default()
            },
        );
        assert_eq!(e.code(), "E_INVALID_INPUT", "{e}");
        let e = refused(
            whole[1].message_id,
            TextRequest {
                block: Some(2),
                path: Some("text".into()),
                ..TextRequest::default()
            },
        );
        assert!(e.to_string().contains("not a JSON Pointer"), "{e}");
        assert_eq!(refused(9_999_999, TextRequest::default()).code(), "E_NOT_FOUND");
        // Of another conversation: as if it did not exist, whatever else the request says.
        let other = TextRequest {
            conversation_id: Some(cid + 1),
            offset: 999_999_999,
            ..TextRequest::default()
        };
        let e = refused(whole[0].message_id, other);
        assert_eq!(e.code(), "E_NOT_FOUND", "{e}");
        let gone = engine.describe_with(&ItemId::Message(9_999_999), DescribeOptions { max_chars: Some(5) });
        assert_eq!(gone.unwrap_err().code(), "E_NOT_FOUND");
    }

    #[test]
    fn messages_read_folded_are_the_messages_with_their_long_texts_cut_and_paged() {
        let (_dir, engine) = crate::test_support::temp_engine();
        folds_and_pages(&engine, "sqlite");
    }

    #[test]
    fn messages_read_folded_on_postgres_stream_from_the_server() {
        let Some((location, url)) = crate::test_support::pg_test_url("folded") else {
            return;
        };
        let options = json!({ "dbPath": url, "timezone": "UTC" });
        let engine = Engine::open(crate::config::Config::from_options(&options, None).unwrap()).unwrap();
        folds_and_pages(&engine, "postgres");
        drop(engine);
        crate::test_support::drop_test_schema(&location);
    }

    /// A row lossless-claw may write: a part of another type with no text of its own and a
    /// long metadata without `raw`, rebuilt as a text block holding the metadata's JSON. That
    /// text is cut and paged as one.
    #[test]
    fn a_block_rebuilt_from_long_metadata_is_shown_as_the_column() {
        let (_dir, engine) = crate::test_support::temp_engine();
        let block = json!({ "type": "patch", "hash": "abc" });
        let cid = engine
            .ingest(
                &Target::Session("patch".into()),
                &[json!({ "role": "assistant", "content": [block] })],
            )
            .unwrap()
            .conversation_id;
        let conn = rusqlite::Connection::open(&engine.config().db_path).unwrap();
        conn.execute(
            "UPDATE message_parts SET text_content = NULL, metadata = json_set(json_remove(metadata, '$.raw'), '$.files', ?1)",
            [("x".repeat(200_000))],
        )
        .unwrap();
        let whole = engine.messages(cid, 0, 10).unwrap();
        let full = whole[0].content[0]["text"].as_str().unwrap().to_string();
        assert!(full.len() > 200_000, "the block is the metadata's JSON");
        let folded = engine.messages_page(cid, &page(1_000)).unwrap();
        assert_eq!(folded[0].content, reference(&whole[0].content, 1_000).0);
        assert_eq!(
            folded[0].folded.clone().unwrap(),
            [FoldedText {
                block: Some(0),
                path: "/text".into(),
                chars: full.chars().count() as u64
            }]
        );
        let request = TextRequest {
            block: Some(0),
            offset: 150_000,
            limit: 1_000_000,
            ..TextRequest::default()
        };
        let p = engine.message_text(whole[0].message_id, &request).unwrap();
        assert_eq!(p.text, full[150_000..]);
    }

    /// `text` as JSON a writer other than serde_json may store: `\u` escapes for every non-ASCII
    /// character (surrogate pairs beyond the BMP), `\/`, `\u0022` for a quote.
    fn loose_json_string(text: &str) -> String {
        let mut out = String::from("\"");
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\u0022"),
                '\\' => out.push_str("\\\\"),
                '/' => out.push_str("\\/"),
                '\n' => out.push_str("\\n"),
                c if (c as u32) < 0x20 || !c.is_ascii() => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// A block rebuilt from a long metadata stored as JSON serde_json would not write (spaces,
    /// `\u` escapes, `1e+21`, `1.50`): shown and paged as the full read shows it, serde_json's
    /// writing of that JSON, not the column's text.
    fn metadata_not_written_by_serde_json(engine: &Engine, run: &dyn Fn(&str, &[&dyn rusqlite::ToSql]), name: &str) {
        let cid = engine
            .ingest(
                &Target::Session(format!("loose-{name}")),
                &[json!({ "role": "assistant", "content": [{ "type": "patch", "hash": "abc" }] })],
            )
            .unwrap()
            .conversation_id;
        let (files, more) = (text(200_000, 9) + "\u{1}/\t", text(5_000, 10));
        let stored = format!(
            "{{ \"type\" : \"patch\",\n  \"n\": 1e+21, \"f\": 1.50, \"name\": {},\n  \"files\" : {} , \"more\": [ {} , true, null ] }}",
            loose_json_string("café 🚀 a/b"),
            loose_json_string(&files),
            loose_json_string(&more),
        );
        let value: Value = serde_json::from_str(&stored).unwrap();
        assert_eq!((&value["files"], &value["more"][0]), (&json!(files), &json!(more)));
        let id = engine.messages(cid, 0, 10).unwrap()[0].message_id;
        run(
            "UPDATE message_parts SET text_content = NULL, metadata = ?1 WHERE message_id = ?2",
            &[&stored, &id],
        );
        let whole = engine.messages(cid, 0, 10).unwrap();
        let full = whole[0].content[0]["text"].as_str().unwrap().to_string();
        assert_eq!(full, value.to_string(), "{name}: the full read writes the JSON out");
        let chars = full.chars().count();
        assert!(chars < stored.chars().count(), "{name}: the column's text is longer");
        let folded = engine.messages_page(cid, &page(1_000)).unwrap();
        assert_eq!(folded[0].content, reference(&whole[0].content, 1_000).0, "{name}");
        let cut = FoldedText {
            block: Some(0),
            path: "/text".into(),
            chars: chars as u64,
        };
        assert_eq!(folded[0].folded.clone().unwrap(), [cut], "{name}");
        let request = |offset: usize, limit: usize| TextRequest {
            block: Some(0),
            offset: offset as i64,
            limit,
            ..TextRequest::default()
        };
        let slice = |offset: usize, limit: usize| full.chars().skip(offset).take(limit).collect::<String>();
        // Pages end to end are the full read's text.
        let mut got = String::new();
        let mut at = 0;
        loop {
            let p = engine.message_text(id, &request(at, 7_777)).unwrap();
            assert_eq!(p.chars, chars as u64, "{name}");
            assert_eq!(p.text, slice(at, 7_777), "{name}: at {at}");
            got.push_str(&p.text);
            match p.next_offset {
                Some(next) => at = next as usize,
                None => break,
            }
        }
        assert_eq!(got, full, "{name}");
        // A page across the end of one long string, the text between and all of the next.
        let end_of_files = full.find("\",\"more\"").unwrap();
        let from = full[..end_of_files].chars().count() - 50;
        let p = engine.message_text(id, &request(from, 10_000)).unwrap();
        assert_eq!(p.text, slice(from, 10_000), "{name}");
    }

    #[test]
    fn a_block_rebuilt_from_metadata_not_written_by_serde_json_is_the_full_reads_text() {
        let (_dir, engine) = crate::test_support::temp_engine();
        let path = engine.config().db_path.clone();
        let run = |sql: &str, params: &[&dyn rusqlite::ToSql]| {
            rusqlite::Connection::open(&path).unwrap().execute(sql, params).unwrap();
        };
        metadata_not_written_by_serde_json(&engine, &run, "sqlite");
    }

    #[test]
    fn a_block_rebuilt_from_metadata_not_written_by_serde_json_on_postgres() {
        let Some((location, url)) = crate::test_support::pg_test_url("folded_loose") else {
            return;
        };
        let options = json!({ "dbPath": url, "timezone": "UTC" });
        let engine = Engine::open(crate::config::Config::from_options(&options, None).unwrap()).unwrap();
        let pg = location.connect().unwrap();
        let run = |sql: &str, params: &[&dyn rusqlite::ToSql]| {
            crate::sql::Db::Pg(&pg).execute(sql, params).unwrap();
        };
        metadata_not_written_by_serde_json(&engine, &run, "postgres");
        drop(engine);
        crate::test_support::drop_test_schema(&location);
    }

    /// Bytes that are not UTF-8 far past the window (SQLite keeps what it is given): the
    /// message is damaged, and its text counted and paged as the full read decodes it (each
    /// stray continuation byte a U+FFFD of its own).
    #[test]
    fn a_long_text_damaged_past_its_window_is_said_to_be_damaged() {
        let (_dir, engine) = crate::test_support::temp_engine();
        let long = json!({ "type": "text", "text": text(100_000, 11), "extra": "x" });
        let cid = engine
            .ingest(
                &Target::Session("damaged".into()),
                &[
                    json!({ "role": "user", "content": text(100_000, 12) }),
                    json!({ "role": "user", "content": [long] }),
                ],
            )
            .unwrap()
            .conversation_id;
        let conn = rusqlite::Connection::open(&engine.config().db_path).unwrap();
        let ids: Vec<i64> = engine
            .messages(cid, 0, 10)
            .unwrap()
            .iter()
            .map(|m| m.message_id)
            .collect();
        // A plain text column, and a short string of a long JSON one.
        conn.execute(
            "UPDATE message_parts SET text_content = text_content || CAST(X'80FF8041E6' AS TEXT) WHERE message_id = ?1",
            [ids[0]],
        )
        .unwrap();
        conn.execute(
            "UPDATE message_parts SET metadata = replace(metadata, '\"extra\":\"x\"', '\"extra\":\"x' || CAST(X'FF' AS TEXT) || '\"') WHERE message_id = ?1",
            [ids[1]],
        )
        .unwrap();
        let whole = engine.messages(cid, 0, 10).unwrap();
        let full = whole[0].content.as_str().unwrap();
        assert!(
            full.ends_with("\u{FFFD}\u{FFFD}\u{FFFD}A\u{FFFD}"),
            "{}",
            &full[full.len() - 20..]
        );
        assert_eq!(whole[1].content[0]["extra"], "x\u{FFFD}");
        assert!(whole.iter().all(|m| m.damaged == Some(true)));
        let folded = engine.messages_page(cid, &page(1_000)).unwrap();
        for (f, w) in folded.iter().zip(&whole) {
            assert_eq!(f.damaged, Some(true), "message {}", w.seq);
            assert_eq!(f.content, reference(&w.content, 1_000).0, "message {}", w.seq);
        }
        let chars = full.chars().count() as u64;
        assert_eq!(folded[0].folded.as_ref().unwrap()[0].chars, chars);
        let request = TextRequest {
            offset: chars as i64 - 6,
            ..TextRequest::default()
        };
        let p = engine.message_text(ids[0], &request).unwrap();
        let tail: String = full.chars().skip(chars as usize - 6).collect();
        assert_eq!((&p.text, p.chars), (&tail, chars));
    }
}
