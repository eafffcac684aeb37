//! `ultra tokenize`: the token ids of a text.

use anyhow::Result;
use serde_json::json;

use super::TokenizeArgs;
use ultra::tokenizer::Tokenizer;

pub fn run(args: TokenizeArgs) -> Result<()> {
    let gguf = args.model.open()?;
    let tokenizer = Tokenizer::from_gguf(&gguf)?;
    let ids = tokenizer.encode(&args.text, !args.no_special)?;
    if args.json {
        println!("{}", json!({ "ids": ids }));
    } else {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        println!("[{}]", list.join(", "));
    }
    Ok(())
}
