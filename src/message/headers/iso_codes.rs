//! The code lists behind language tags (D18): sorted tables, and the same
//! codes as sets of bits, one bit per pair of letters, looked up without a
//! search.
//!
//! Generated from the Debian `iso-codes` 4.15.0 data (`iso_639-2.json`, the
//! entries that carry an `alpha_2`, and `iso_3166-1.json`), which follows the
//! ISO 639 and ISO 3166 maintenance agencies. Regenerate from a newer
//! `iso-codes` when the standards change; keep both tables sorted.

/// ISO 639-1 two-letter language codes, lower-case, sorted: 184 codes.
/// Includes `bh` (Bihari), deprecated in 2021 but still found in tags.
const ISO_639_1: &[[u8; 2]] = &[
    *b"aa", *b"ab", *b"ae", *b"af", *b"ak", *b"am", *b"an", *b"ar", *b"as", *b"av", *b"ay", *b"az", *b"ba",
    *b"be", *b"bg", *b"bh", *b"bi", *b"bm", *b"bn", *b"bo", *b"br", *b"bs", *b"ca", *b"ce", *b"ch", *b"co",
    *b"cr", *b"cs", *b"cu", *b"cv", *b"cy", *b"da", *b"de", *b"dv", *b"dz", *b"ee", *b"el", *b"en", *b"eo",
    *b"es", *b"et", *b"eu", *b"fa", *b"ff", *b"fi", *b"fj", *b"fo", *b"fr", *b"fy", *b"ga", *b"gd", *b"gl",
    *b"gn", *b"gu", *b"gv", *b"ha", *b"he", *b"hi", *b"ho", *b"hr", *b"ht", *b"hu", *b"hy", *b"hz", *b"ia",
    *b"id", *b"ie", *b"ig", *b"ii", *b"ik", *b"io", *b"is", *b"it", *b"iu", *b"ja", *b"jv", *b"ka", *b"kg",
    *b"ki", *b"kj", *b"kk", *b"kl", *b"km", *b"kn", *b"ko", *b"kr", *b"ks", *b"ku", *b"kv", *b"kw", *b"ky",
    *b"la", *b"lb", *b"lg", *b"li", *b"ln", *b"lo", *b"lt", *b"lu", *b"lv", *b"mg", *b"mh", *b"mi", *b"mk",
    *b"ml", *b"mn", *b"mr", *b"ms", *b"mt", *b"my", *b"na", *b"nb", *b"nd", *b"ne", *b"ng", *b"nl", *b"nn",
    *b"no", *b"nr", *b"nv", *b"ny", *b"oc", *b"oj", *b"om", *b"or", *b"os", *b"pa", *b"pi", *b"pl", *b"ps",
    *b"pt", *b"qu", *b"rm", *b"rn", *b"ro", *b"ru", *b"rw", *b"sa", *b"sc", *b"sd", *b"se", *b"sg", *b"si",
    *b"sk", *b"sl", *b"sm", *b"sn", *b"so", *b"sq", *b"sr", *b"ss", *b"st", *b"su", *b"sv", *b"sw", *b"ta",
    *b"te", *b"tg", *b"th", *b"ti", *b"tk", *b"tl", *b"tn", *b"to", *b"tr", *b"ts", *b"tt", *b"tw", *b"ty",
    *b"ug", *b"uk", *b"ur", *b"uz", *b"ve", *b"vi", *b"vo", *b"wa", *b"wo", *b"xh", *b"yi", *b"yo", *b"za",
    *b"zh", *b"zu",
];

/// ISO 3166-1 alpha-2 country codes, upper-case, sorted: the 249
/// officially assigned codes.
const ISO_3166_1_ALPHA_2: &[[u8; 2]] = &[
    *b"AD", *b"AE", *b"AF", *b"AG", *b"AI", *b"AL", *b"AM", *b"AO", *b"AQ", *b"AR", *b"AS", *b"AT", *b"AU",
    *b"AW", *b"AX", *b"AZ", *b"BA", *b"BB", *b"BD", *b"BE", *b"BF", *b"BG", *b"BH", *b"BI", *b"BJ", *b"BL",
    *b"BM", *b"BN", *b"BO", *b"BQ", *b"BR", *b"BS", *b"BT", *b"BV", *b"BW", *b"BY", *b"BZ", *b"CA", *b"CC",
    *b"CD", *b"CF", *b"CG", *b"CH", *b"CI", *b"CK", *b"CL", *b"CM", *b"CN", *b"CO", *b"CR", *b"CU", *b"CV",
    *b"CW", *b"CX", *b"CY", *b"CZ", *b"DE", *b"DJ", *b"DK", *b"DM", *b"DO", *b"DZ", *b"EC", *b"EE", *b"EG",
    *b"EH", *b"ER", *b"ES", *b"ET", *b"FI", *b"FJ", *b"FK", *b"FM", *b"FO", *b"FR", *b"GA", *b"GB", *b"GD",
    *b"GE", *b"GF", *b"GG", *b"GH", *b"GI", *b"GL", *b"GM", *b"GN", *b"GP", *b"GQ", *b"GR", *b"GS", *b"GT",
    *b"GU", *b"GW", *b"GY", *b"HK", *b"HM", *b"HN", *b"HR", *b"HT", *b"HU", *b"ID", *b"IE", *b"IL", *b"IM",
    *b"IN", *b"IO", *b"IQ", *b"IR", *b"IS", *b"IT", *b"JE", *b"JM", *b"JO", *b"JP", *b"KE", *b"KG", *b"KH",
    *b"KI", *b"KM", *b"KN", *b"KP", *b"KR", *b"KW", *b"KY", *b"KZ", *b"LA", *b"LB", *b"LC", *b"LI", *b"LK",
    *b"LR", *b"LS", *b"LT", *b"LU", *b"LV", *b"LY", *b"MA", *b"MC", *b"MD", *b"ME", *b"MF", *b"MG", *b"MH",
    *b"MK", *b"ML", *b"MM", *b"MN", *b"MO", *b"MP", *b"MQ", *b"MR", *b"MS", *b"MT", *b"MU", *b"MV", *b"MW",
    *b"MX", *b"MY", *b"MZ", *b"NA", *b"NC", *b"NE", *b"NF", *b"NG", *b"NI", *b"NL", *b"NO", *b"NP", *b"NR",
    *b"NU", *b"NZ", *b"OM", *b"PA", *b"PE", *b"PF", *b"PG", *b"PH", *b"PK", *b"PL", *b"PM", *b"PN", *b"PR",
    *b"PS", *b"PT", *b"PW", *b"PY", *b"QA", *b"RE", *b"RO", *b"RS", *b"RU", *b"RW", *b"SA", *b"SB", *b"SC",
    *b"SD", *b"SE", *b"SG", *b"SH", *b"SI", *b"SJ", *b"SK", *b"SL", *b"SM", *b"SN", *b"SO", *b"SR", *b"SS",
    *b"ST", *b"SV", *b"SX", *b"SY", *b"SZ", *b"TC", *b"TD", *b"TF", *b"TG", *b"TH", *b"TJ", *b"TK", *b"TL",
    *b"TM", *b"TN", *b"TO", *b"TR", *b"TT", *b"TV", *b"TW", *b"TZ", *b"UA", *b"UG", *b"UM", *b"US", *b"UY",
    *b"UZ", *b"VA", *b"VC", *b"VE", *b"VG", *b"VI", *b"VN", *b"VU", *b"WF", *b"WS", *b"YE", *b"YT", *b"ZA",
    *b"ZM", *b"ZW",
];

/// A table as a set: for a code `[first, second]`, bit `second - letter`
/// of word `first - letter`.
type Set = [u32; 26];

const fn set_of(codes: &[[u8; 2]], letter: u8) -> Set {
    let mut set = [0; 26];
    let mut i = 0;
    while i < codes.len() {
        let [first, second] = codes[i];
        set[(first - letter) as usize] |= 1 << (second - letter);
        i += 1;
    }
    set
}

const LANGUAGES: Set = set_of(ISO_639_1, b'a');
const COUNTRIES: Set = set_of(ISO_3166_1_ALPHA_2, b'A');

fn contains(set: &Set, code: [u8; 2], letter: u8) -> bool {
    let [first, second] = code.map(|b| b.wrapping_sub(letter));
    first < 26 && second < 26 && set[usize::from(first)] >> second & 1 == 1
}

/// Whether `code` (lower-case) is an ISO 639-1 language code.
pub(super) fn is_language(code: [u8; 2]) -> bool {
    contains(&LANGUAGES, code, b'a')
}

/// Whether `code` (upper-case) is an ISO 3166-1 alpha-2 country code.
pub(super) fn is_country(code: [u8; 2]) -> bool {
    contains(&COUNTRIES, code, b'A')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_complete_and_well_formed() {
        assert_eq!(ISO_639_1.len(), 184);
        assert_eq!(ISO_3166_1_ALPHA_2.len(), 249);
        assert!(ISO_639_1.windows(2).all(|w| w[0] < w[1]));
        assert!(ISO_3166_1_ALPHA_2.windows(2).all(|w| w[0] < w[1]));
        assert!(ISO_639_1.iter().flatten().all(u8::is_ascii_lowercase));
        assert!(ISO_3166_1_ALPHA_2.iter().flatten().all(u8::is_ascii_uppercase));
    }

    #[test]
    fn the_sets_hold_the_tables_and_nothing_else() {
        for first in 0..=255u8 {
            for second in 0..=255u8 {
                let code = [first, second];
                assert_eq!(is_language(code), ISO_639_1.binary_search(&code).is_ok());
                assert_eq!(is_country(code), ISO_3166_1_ALPHA_2.binary_search(&code).is_ok());
            }
        }
    }

    #[test]
    fn known_and_unknown_codes() {
        assert!(is_language(*b"en") && is_language(*b"zu") && is_language(*b"aa"));
        assert!(!is_language(*b"xx") && !is_language(*b"EN"));
        assert!(is_country(*b"US") && is_country(*b"AX") && is_country(*b"ZW"));
        // UK and EU are reserved, not assigned; XK (Kosovo) is user-assigned.
        assert!(!is_country(*b"UK") && !is_country(*b"EU") && !is_country(*b"XX"));
    }
}
