//! Documents for the model: text-like files inlined up to a cap (`MAX_TEXT_CHARS`, 20 000), PDFs
//! turned into text by pdf-extract off the async threads (`spawn_blocking`) — under a page cap
//! (50), a time limit (20 s) and a size cap (20 MB), with its panics caught (`catch_unwind`),
//! because malformed PDFs are common. Never runs a parser on the async threads.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Characters of a document given to the model; the rest is left to the file tools.
pub const MAX_TEXT_CHARS: usize = 20_000;
/// Bytes read of a text-like file (a little over the character cap, for multi-byte text).
const MAX_TEXT_BYTES: u64 = 4 * MAX_TEXT_CHARS as u64;
/// Largest PDF parsed (the whole file is held in memory while parsing).
pub const MAX_PDF_BYTES: u64 = 20 * 1024 * 1024;
/// Pages of a PDF read.
pub const MAX_PDF_PAGES: u32 = 50;
/// Time a PDF's extraction may take.
pub const PDF_TIMEOUT: Duration = Duration::from_secs(20);

/// What could be read from a document.
#[derive(Debug, PartialEq, Eq)]
pub enum DocText {
    /// Its text, and whether it was cut (at the character or page cap).
    Text { text: String, cut: bool },
    /// Not text-like and not a PDF.
    Binary,
    /// A PDF whose text could not be read, and why.
    Failed(String),
}

/// Whether a file with this MIME type or name is text a model can read as is.
fn text_like(mime: Option<&str>, name: &str) -> bool {
    let mime = mime.unwrap_or_default();
    let ext = Path::new(name).extension().and_then(|e| e.to_str()).unwrap_or_default().to_ascii_lowercase();
    mime.starts_with("text/")
        || ["application/json", "application/xml", "application/x-yaml", "application/toml", "application/x-sh"]
            .contains(&mime)
        || [
            "txt", "md", "markdown", "csv", "tsv", "json", "jsonl", "yaml", "yml", "toml", "xml", "html", "htm", "log",
            "ini", "cfg", "conf", "rs", "py", "js", "ts", "go", "java", "c", "h", "cpp", "sh", "sql", "rb",
        ]
        .contains(&ext.as_str())
}

fn is_pdf(mime: Option<&str>, head: &[u8]) -> bool {
    mime == Some("application/pdf") || head.starts_with(b"%PDF-")
}

/// The text of the document at `file` (MIME type and original name as the platform said).
pub async fn read(file: &Path, mime: Option<&str>, name: &str) -> DocText {
    let head = match read_head(file, MAX_TEXT_BYTES).await {
        Ok(head) => head,
        Err(e) => return DocText::Failed(format!("cannot read the file: {e}")),
    };
    if is_pdf(mime, &head) {
        return pdf_text(file.to_path_buf(), MAX_PDF_PAGES, PDF_TIMEOUT).await;
    }
    if !text_like(mime, name) || head.contains(&0) {
        return DocText::Binary;
    }
    let size = tokio::fs::metadata(file).await.map(|m| m.len()).unwrap_or(0);
    let text = String::from_utf8_lossy(&head);
    let (text, cut) = clip(&text);
    DocText::Text { text, cut: cut || size > head.len() as u64 }
}

async fn read_head(file: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let handle = tokio::fs::File::open(file).await?;
    let mut bytes = Vec::new();
    handle.take(max).read_to_end(&mut bytes).await?;
    Ok(bytes)
}

/// `text` cut at `MAX_TEXT_CHARS`, and whether it was.
fn clip(text: &str) -> (String, bool) {
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((at, _)) => (text[..at].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

/// Extract a PDF's text on a blocking thread: at most `max_pages` pages, stopping between pages
/// once `timeout` has passed (the caller stops waiting then too), a parser panic caught.
pub async fn pdf_text(file: PathBuf, max_pages: u32, timeout: Duration) -> DocText {
    let deadline = Instant::now() + timeout;
    let work = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(|| extract(&file, max_pages, deadline))
            .unwrap_or_else(|_| DocText::Failed("the PDF parser crashed on this file".into()))
    });
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok(text)) => text,
        Ok(Err(_)) => DocText::Failed("the PDF parser crashed on this file".into()),
        Err(_) => DocText::Failed(format!("reading the PDF took longer than {} s", timeout.as_secs())),
    }
}

fn extract(file: &Path, max_pages: u32, deadline: Instant) -> DocText {
    match std::fs::metadata(file) {
        Ok(meta) if meta.len() > MAX_PDF_BYTES => {
            return DocText::Failed(format!("the PDF is over the {} MB limit for reading", MAX_PDF_BYTES >> 20));
        }
        Ok(_) => {}
        Err(e) => return DocText::Failed(format!("cannot read the file: {e}")),
    }
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(e) => return DocText::Failed(format!("cannot read the file: {e}")),
    };
    let doc = match pdf_extract::Document::load_mem(&bytes) {
        Ok(doc) => doc,
        Err(e) => return DocText::Failed(format!("not a readable PDF: {e}")),
    };
    if doc.is_encrypted() {
        return DocText::Failed("the PDF is encrypted".into());
    }
    let pages: Vec<u32> = doc.get_pages().into_keys().collect();
    let mut text = String::new();
    let mut cut = pages.len() > max_pages as usize;
    for page in pages.into_iter().take(max_pages as usize) {
        if Instant::now() >= deadline || text.chars().count() >= MAX_TEXT_CHARS {
            cut = true;
            break;
        }
        let mut out = pdf_extract::PlainTextOutput::new(&mut text);
        if let Err(e) = pdf_extract::output_doc_page(&doc, &mut out, page) {
            text.push_str(&format!("\n[page {page} unreadable: {e}]\n"));
        }
    }
    let (text, clipped) = clip(text.trim());
    DocText::Text { text, cut: cut || clipped }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A one-page PDF saying "Hello PDF" (offsets computed, so the xref table is valid).
    pub(crate) fn tiny_pdf(text: &str) -> Vec<u8> {
        let stream = format!("BT /F1 24 Tf 72 720 Td ({text}) Tj ET");
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_owned(),
            format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()),
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
        ];
        let mut pdf = b"%PDF-1.4\n".to_vec();
        let mut offsets = Vec::new();
        for (i, body) in objects.iter().enumerate() {
            offsets.push(pdf.len());
            pdf.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
        }
        let xref = pdf.len();
        pdf.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
        for offset in offsets {
            pdf.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
        }
        pdf.extend_from_slice(
            format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).as_bytes(),
        );
        pdf
    }

    #[tokio::test]
    async fn text_files_are_inlined_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes.txt");
        std::fs::write(&notes, "remember the milk").unwrap();
        let read_notes = read(&notes, Some("text/plain"), "notes.txt").await;
        assert_eq!(read_notes, DocText::Text { text: "remember the milk".into(), cut: false });
        let long = dir.path().join("long.md");
        std::fs::write(&long, "é".repeat(MAX_TEXT_CHARS + 10)).unwrap();
        let DocText::Text { text, cut } = read(&long, None, "long.md").await else { panic!() };
        assert!(cut);
        assert_eq!(text.chars().count(), MAX_TEXT_CHARS);
        let blob = dir.path().join("x.bin");
        std::fs::write(&blob, b"\x00\x01\x02").unwrap();
        assert_eq!(read(&blob, Some("application/octet-stream"), "x.bin").await, DocText::Binary);
        // A ".txt" holding NUL bytes is not text either.
        std::fs::write(&notes, b"a\x00b").unwrap();
        assert_eq!(read(&notes, Some("text/plain"), "notes.txt").await, DocText::Binary);
    }

    #[tokio::test]
    async fn pdfs_become_text_and_broken_ones_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("a.pdf");
        std::fs::write(&good, tiny_pdf("Hello PDF")).unwrap();
        let DocText::Text { text, cut } = read(&good, None, "a.pdf").await else { panic!() };
        assert!(text.contains("Hello PDF"), "{text:?}");
        assert!(!cut);
        // Zero pages allowed: nothing read, and it says it was cut.
        let DocText::Text { text, cut } = pdf_text(good.clone(), 0, PDF_TIMEOUT).await else { panic!() };
        assert!(text.is_empty() && cut);
        for (i, broken) in
            [b"%PDF-1.4\ngarbage".to_vec(), tiny_pdf("x")[..120].to_vec(), b"%PDF-".to_vec()].into_iter().enumerate()
        {
            let file = dir.path().join(format!("broken{i}.pdf"));
            std::fs::write(&file, broken).unwrap();
            assert!(matches!(read(&file, Some("application/pdf"), "b.pdf").await, DocText::Failed(_)), "{i}");
        }
    }
}
