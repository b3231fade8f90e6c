use super::*;

fn frame() -> Frame<'static> {
    Frame {
        subxid: 0x0102_0304,
        topic: b"app.public.t",
        key: b"{\"id\":1}",
        body: b"{\"op\":\"c\"}",
        source_names: b"\"schema\":\"public\",\"table\":\"t\"",
        lsn: 0x1_0000_00AB,
        tombstone: true,
    }
}

#[test]
fn a_frame_reads_back_as_written() {
    let mut out = Vec::new();
    push_frame(&mut out, &frame()).unwrap();
    push_frame(&mut out, &frame()).unwrap();
    let (first, next) = read_frame(&out, 0).unwrap();
    assert_eq!(first, frame());
    let (second, end) = read_frame(&out, next).unwrap();
    assert_eq!(second, frame());
    assert_eq!(end, out.len());
    assert_eq!(&out[..4], &[1, 2, 3, 4]);
    assert_eq!(out[28], 1);
}

#[test]
fn a_frame_cut_short_is_not_read() {
    let mut out = Vec::new();
    push_frame(&mut out, &frame()).unwrap();
    for cut in 0..out.len() {
        assert!(read_frame(&out[..cut], 0).is_none(), "cut at {cut}");
    }
    assert!(read_frame(&out, usize::MAX).is_none());
}

#[test]
fn completing_splices_the_source_block() {
    let mut out = Vec::new();
    let commit = Commit {
        db: b"\"app\"",
        commit_lsn: b"1/B0",
        tail: b"\"txid\":7,\"commit_ts\":\"x\",\"snapshot\":false}}",
    };
    push_completed(&mut out, &frame(), &commit, 12);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"op\":\"c\",\"source\":{\"db\":\"app\",\"schema\":\"public\",\"table\":\"t\",\
         \"lsn\":\"1/AB\",\"commit_lsn\":\"1/B0\",\"seq\":12,\"txid\":7,\"commit_ts\":\"x\",\
         \"snapshot\":false}}"
    );
}
